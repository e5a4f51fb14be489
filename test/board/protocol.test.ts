import { describe, expect, it } from 'vitest';
import { ClientMessageSchema, ClientMessages } from '../../realtime/protocol/clientMessages.js';
import { CHAT_MAX_CHARS } from '../../realtime/protocol/limits.js';
import { ServerMessages } from '../../realtime/protocol/serverMessages.js';

describe('protocol catalogue schemas (docs/protocol.md)', () => {
  it('has one schema per client message type and accepts a well-formed message of each', () => {
    const samples: Record<keyof typeof ClientMessages, unknown> = {
      cursor: { type: 'cursor', x: 1, y: 2, page: 'page-1' },
      ping: { type: 'ping', id: 7 },
      'board.op': { type: 'board.op', ref: 'r1', op: { type: 'page.pin', page_id: null } },
      'board.sync': { type: 'board.sync', since: 0 },
      'board.stroke': { type: 'board.stroke', id: 's1', from: 0, points: [[0, 0], [1, 2, 0.5]], head: { id: 's1', page_id: 'page-1', z: 'a0', x: 1, y: 2, angle: 0, style: {}, locked: false, version: 3, version_nonce: 7, type: 'freehand' } },
      'chat.send': { type: 'chat.send', text: 'hello' },
      'rtc.hello': { type: 'rtc.hello', to: 'p1' },
      'rtc.offer': { type: 'rtc.offer', to: 'p1', sdp: 'v=0', to_conn: 'abcdefABCDEF' },
      'rtc.answer': { type: 'rtc.answer', to: 'p1', sdp: 'v=0' },
      'rtc.ice': { type: 'rtc.ice', to: 'p1', candidate: { candidate: 'candidate:1 1 udp 1 127.0.0.1 9 typ host', sdpMid: '0', sdpMLineIndex: 0 } },
      'media.state': { type: 'media.state', camera: true, mic: false },
      'teacher.mute': { type: 'teacher.mute', participant_id: 'p2', mic: true },
      'teacher.unmute': { type: 'teacher.unmute', participant_id: 'p2', mic: true },
      'teacher.remove': { type: 'teacher.remove', participant_id: 'p2' },
      'cursor.leave': { type: 'cursor.leave' },
      view: { type: 'view', page: 'p1', x1: -10, y1: -10, x2: 800, y2: 600 },
      follow: { type: 'follow', to: null },
      lead: { type: 'lead', on: true },
    };
    for (const [type, msg] of Object.entries(samples)) {
      expect(ClientMessages[type as keyof typeof ClientMessages].safeParse(msg).success, type).toBe(true);
      expect(ClientMessageSchema.safeParse(msg).success, type).toBe(true);
    }
    expect(Object.keys(ServerMessages).sort()).toEqual(
      [
        'welcome', 'presence', 'cursor', 'cursor.leave', 'pong', 'error', 'view', 'follow', 'lead',
        'board.ack', 'board.ops', 'board.reject', 'board.resync', 'board.state', 'board.stroke',
        'chat', 'media.state', 'muted', 'unmuted', 'call.ice_servers', 'rtc.hello', 'rtc.answer', 'rtc.ice', 'rtc.offer', 'rtc.bye', 'lesson.updated',
      ].sort(),
    );
  });

  it('refuses malformed messages: empty or oversized chat, unknown fields, negative seq, huge SDP, a malformed call id', () => {
    for (const bad of [
      { type: 'chat.send', text: '   ' },
      { type: 'chat.send', text: 'x'.repeat(CHAT_MAX_CHARS + 1) },
      { type: 'chat.send', text: 'hi', html: '<b>' },
      { type: 'board.sync', since: -1 },
      { type: 'rtc.offer', to: 'p1', sdp: 'x'.repeat(70_000) },
      { type: 'rtc.offer', to: 'p1', sdp: 'v=0', to_conn: 'short' },
      { type: 'teacher.remove' },
      { type: 'board.op', op: {} },
      { type: 'board.stroke', id: 's1', from: 0, points: [] },
      { type: 'board.stroke', id: 's1', from: 5, points: Array.from({ length: 501 }, () => [0, 0]) },
      { type: 'board.stroke', id: 's1', from: 0, points: [[0, 0]], head: { type: 'rectangle' } },
      { type: 'cursor', x: 2e9, y: 0 },
      { type: 'cursor', x: 0, y: 0, tool: 'pen' },
      { type: 'view', page: 'p1', x1: 0, y1: 0, x2: 1, y2: 1, zoom: 2 },
      { type: 'lead', on: 'yes' },
      { type: 'nope' },
    ]) {
      expect(ClientMessageSchema.safeParse(bad).success, JSON.stringify(bad).slice(0, 60)).toBe(false);
    }
  });

  it('describes the error frames the gateway sends with every code, and refuses a code outside the table', () => {
    for (const code of ['forbidden', 'board_only', 'not_found', 'rate_limited', 'not_ready']) {
      expect(ServerMessages.error.safeParse({ type: 'error', code, message: 'm', ref: 'rtc.offer' }).success, code).toBe(true);
    }
    expect(ServerMessages.error.safeParse({ type: 'error', code: 'nope', message: 'm' }).success).toBe(false);
  });
});
