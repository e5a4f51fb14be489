import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defaultFeatures } from '../../realtime/features/index.js';
import { updateLesson } from '../../src/domain/lessons.js';
import { ClientMessages } from '../../realtime/protocol/clientMessages.js';
import { ERROR_CODES } from '../../realtime/protocol/errors.js';
import { coreMessages } from '../../realtime/protocol/messages/index.js';
import { ServerMessages } from '../../realtime/protocol/serverMessages.js';
import { rect, stroke } from '../board/factories.js';
import { fileDeps } from '../helpers/deps.js';
import { join, type Received } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

/**
 * The catalogue (realtime/protocol/{clientMessages,serverMessages,errors}.ts)
 * is the one description of the protocol: what the gateway handles and what
 * it sends must be in it.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir)).flatMap((f) => {
    const rel = path.join(dir, f);
    if (statSync(path.join(ROOT, rel)).isDirectory()) return sources(rel);
    return rel.endsWith('.ts') ? [rel] : [];
  });
}

describe('protocol catalogue', () => {
  const deps = fileDeps();
  const features = defaultFeatures(deps);
  afterAll(() => Promise.all(features.map((f) => f.close?.())));
  const handled = [...coreMessages, ...features.flatMap((f) => f.messages ?? [])];
  const json = (s: z.ZodType) => z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' });

  it('has every message type the gateway handles, each validated with a schema equal to the catalogue one, and a handler for each of its client messages', () => {
    expect(handled.map((d) => d.type).sort()).toEqual(Object.keys(ClientMessages).sort());
    for (const def of handled) expect(json(def.schema), def.type).toEqual(json(ClientMessages[def.type as keyof typeof ClientMessages]));
  });

  it('lists every error code that realtime/ and src/ send in an error frame', () => {
    const sender = /\b(?:sendError|invalidFrame|errorFrame)\(\s*'([a-z_]+)'/g;
    const raw = /type:\s*'error',\s*code:\s*'([a-z_]+)'/g;
    const parseOutcome = /\{\s*ok:\s*false,\s*code:\s*'([a-z_]+)'/g;
    const sent = new Map<string, string>();
    for (const file of [...sources('realtime'), ...sources('src')]) {
      const text = readFileSync(path.join(ROOT, file), 'utf8');
      for (const re of [sender, raw, parseOutcome]) for (const m of text.matchAll(re)) sent.set(m[1], file);
    }
    // the scan must see the senders it is meant to check (a renamed helper would make it pass vacuously)
    expect([...sent.keys()]).toEqual(expect.arrayContaining(['not_ready', 'internal', 'rate_limited', 'bad_json', 'binary_not_supported', 'forbidden', 'board_only', 'not_found']));
    for (const [code, file] of sent) expect(Object.keys(ERROR_CODES), `${code} (sent in ${file})`).toContain(code);
  });
});

describe('frames on the wire', () => {
  it('every frame the gateway sends in a lesson is a catalogue message with exactly the catalogue fields', async () => {
    // TURN credentials that live 2 s, so their renewal (call.ice_servers) is on the wire within a second
    const gw = await startTestGateway({ env: { TURN_URLS: 'turn:turn.example.com:3478', TURN_SECRET: 'catalogue-turn-secret', TURN_TTL_SECONDS: '2' } });
    const f = await lessonWithLinks(gw.deps.sql, { mode: 'full' });
    const t = await join(gw.wsUrl(await f.link('t', { role: 'teacher', name: 'Tess' })));
    const s = await join(gw.wsUrl(await f.link('s')));
    const tab2 = await join(gw.wsUrl(await f.link('s'))); // the student's second tab
    const sid = s.of('welcome')[0].you.id as string;
    const tid = t.of('welcome')[0].you.id as string;
    const tabConn = tab2.of('welcome')[0].call_id as string;

    t.send({ type: 'cursor', x: 1, y: 2, page: 'page-1', tool: 'laser', button: 'down' });
    t.send({ type: 'cursor.leave' });
    t.send({ type: 'view', page: 'page-1', x1: 0, y1: 0, x2: 800, y2: 600 });
    s.send({ type: 'follow', to: tid });
    t.send({ type: 'lead', on: true });
    t.send({ type: 'ping', id: 1 });
    t.send({ type: 'chat.send', text: 'hello' });
    t.send({ type: 'board.sync', since: 0 });
    t.send({ type: 'board.op', ref: 'r1', op: { type: 'element.add', elements: [rect('e1')] } });
    s.send({ type: 'board.op', ref: 'r2', op: { type: 'page.delete', page_id: 'page-1' } }); // teacher only: board.reject
    const { points, ...head } = stroke('k1', 4) as unknown as { points: unknown[] };
    t.send({ type: 'board.stroke', id: 'k1', from: 0, points, head });
    t.send({ type: 'rtc.hello', to: sid });
    t.send({ type: 'rtc.offer', to: sid, to_conn: tabConn, sdp: 'v=0' });
    t.send({ type: 'rtc.answer', to: sid, sdp: 'v=0' });
    t.send({ type: 'rtc.ice', to: sid, candidate: { candidate: 'candidate:1 1 udp 1 192.0.2.1 9 typ host', sdpMid: '0', sdpMLineIndex: 0 } });
    s.send({ type: 'media.state', camera: true, mic: true });
    t.send({ type: 'teacher.mute', participant_id: sid, mic: true });
    t.send({ type: 'teacher.unmute', participant_id: sid, mic: true });
    s.send({ type: 'teacher.remove', participant_id: tid }); // error forbidden
    t.send({ type: 'rtc.offer', to: tid, sdp: 'v=0' }); // to myself: error not_found
    t.send('{not json');
    t.send({ type: 'nope' });
    t.send({ type: 'chat.send' });
    t.ws.send(Buffer.from([1, 2, 3]));
    await s.waitFor((m) => m.type === 'unmuted', 'unmuted');
    await t.waitFor((m) => m.type === 'error' && m.code === 'binary_not_supported', 'binary refused');
    await s.waitFor((m) => m.type === 'board.reject', 'board.reject');
    await t.waitFor((m) => m.type === 'board.ack', 'board.ack');
    await s.waitFor((m) => m.type === 'board.ops', 'board.ops');
    await updateLesson(gw.deps.sql, f.partner, f.lesson.id, { title: 'Renamed', subject_mode: 'physics' }); // as PATCH /lessons/{id}
    await t.waitFor((m) => m.type === 'lesson.updated', 'lesson.updated');
    await t.waitFor((m) => m.type === 'call.ice_servers', 'call.ice_servers', 5000);
    await tab2.close();
    await t.waitFor((m) => m.type === 'rtc.bye', 'rtc.bye');
    await s.close();
    await t.waitFor((m) => m.type === 'presence' && m.event === 'left', 'presence left');

    const frames: Received[] = [...t.messages, ...s.messages, ...tab2.messages];
    for (const m of frames) {
      const schema = ServerMessages[m.type as keyof typeof ServerMessages];
      expect(schema, `${m.type} is in the catalogue`).toBeDefined();
      // zod drops fields it does not know: equal after parsing means no field outside the schema
      expect(schema.parse(m), m.type).toEqual(m);
    }
    const types = new Set(frames.map((m) => m.type));
    const codes = new Set(frames.filter((m) => m.type === 'error').map((m) => m.code));
    expect([...types].sort()).toEqual(Object.keys(ServerMessages).filter((k) => k !== 'board.resync').sort());
    expect([...codes].sort()).toEqual(['bad_json', 'binary_not_supported', 'forbidden', 'invalid_message', 'not_found', 'unknown_type']);
    await t.close();
  }, 60_000);
});
