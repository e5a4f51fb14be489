import { describe, expect, it } from 'vitest';
import { join } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

/**
 * The call is a mesh of connections (realtime/features/call/connections.ts,
 * docs/protocol.md "Video call"): each connection has its own call id,
 * signals carry the sender's and may name the receiver's, and a closed
 * connection is announced with rtc.bye even while its person stays.
 */
const gw = await startTestGateway();

describe('call signalling per connection', () => {
  it('gives each connection its own call id, relays hello and to_conn with the sender\'s call id, and announces a closed tab', async () => {
    const f = await lessonWithLinks(gw.deps.sql, { mode: 'full' });
    const teacher = await join(gw.wsUrl(await f.link('t', { role: 'teacher' })));
    const studentLink = await f.link('s');
    const laptop = await join(gw.wsUrl(studentLink));
    const tablet = await join(gw.wsUrl(studentLink)); // the same person in a second tab
    const [tw, lw, bw] = [teacher, laptop, tablet].map((c) => c.of('welcome')[0]);
    expect(lw.you.id).toBe(bw.you.id);
    for (const w of [tw, lw, bw]) expect(w.call_id).toMatch(/^[A-Za-z0-9]{12}$/);
    expect(new Set([tw.call_id, lw.call_id, bw.call_id]).size).toBe(3);

    // the tablet says hello: every connection of the teacher hears it, with the tablet's call id
    tablet.send({ type: 'rtc.hello', to: tw.you.id });
    expect(await teacher.waitType('rtc.hello')).toEqual({ type: 'rtc.hello', from: bw.you.id, from_conn: bw.call_id });
    // the teacher's offer names the tablet: it reaches both of the person's tabs, marked for the tablet
    teacher.send({ type: 'rtc.offer', to: lw.you.id, to_conn: bw.call_id, sdp: 'v=0 offer' });
    const offer = { type: 'rtc.offer', from: tw.you.id, from_conn: tw.call_id, to_conn: bw.call_id, sdp: 'v=0 offer' };
    expect(await tablet.waitType('rtc.offer')).toEqual(offer);
    expect(await laptop.waitType('rtc.offer')).toEqual(offer);

    // a call id that cannot be one is refused, and nothing is relayed
    teacher.send({ type: 'rtc.offer', to: lw.you.id, to_conn: 'not a call id', sdp: 'v=0' });
    expect(await teacher.waitType('error')).toMatchObject({ code: 'invalid_message' });
    // the two tabs of one person never call each other
    laptop.send({ type: 'rtc.hello', to: lw.you.id });
    expect(await laptop.waitType('error')).toMatchObject({ code: 'not_found', ref: 'rtc.hello' });

    // the tablet closes; the person is still here (laptop), and everyone hears which tab went
    await tablet.close();
    const bye = { type: 'rtc.bye', from: bw.you.id, from_conn: bw.call_id };
    expect(await teacher.waitType('rtc.bye')).toEqual(bye);
    expect(await laptop.waitType('rtc.bye')).toEqual(bye);
    expect(teacher.of('presence').filter((m) => m.event === 'left')).toEqual([]);
    expect(laptop.of('rtc.offer')).toHaveLength(1);
    await Promise.all([teacher, laptop].map((c) => c.close()));
  });

  it('sends no call id and no rtc.bye in board_only lessons', async () => {
    const f = await lessonWithLinks(gw.deps.sql, { mode: 'board_only' });
    const a = await join(gw.wsUrl(await f.link('a')));
    const b = await join(gw.wsUrl(await f.link('b')));
    expect(a.of('welcome')[0].call_id).toBeUndefined();
    await b.close();
    await new Promise((r) => setTimeout(r, 300));
    expect(a.of('rtc.bye')).toEqual([]);
    await a.close();
  });
});
