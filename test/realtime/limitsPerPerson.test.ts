import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { rect } from '../board/factories.js';
import { join, TestClient } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

/**
 * Limits per person, not per socket, on one gateway node
 * (the same rules across nodes and under attack: limitsAttack.test.ts).
 * The clock is manual: nothing refills while a test sends.
 */
const clock = new ManualClock(new Date('2026-05-05T12:00:00Z'));
const gw = await startTestGateway({ clock, env: { GATEWAY_MAX_SOCKETS_PER_PERSON: '3' } });
const { sql } = gw.deps;
let ipCounter = 10;
const ip = () => ({ localAddress: `127.0.1.${ipCounter++}` });
const settle = () => new Promise((r) => setTimeout(r, 150));

describe('sockets per person', () => {
  it('a socket past GATEWAY_MAX_SOCKETS_PER_PERSON closes the person’s oldest with 4409, whichever of their links it came on', async () => {
    const f = await lessonWithLinks(sql);
    const teacher = await join(gw.wsUrl(await f.link('t', { role: 'teacher', at: clock.now() })), ip());
    const first = await f.link('s', { at: clock.now() });
    const second = await f.link('s', { at: clock.now() }); // the same user, another link
    const s1 = await join(gw.wsUrl(first), ip());
    const s2 = await join(gw.wsUrl(second), ip());
    const s3 = await join(gw.wsUrl(first), ip());
    expect(s1.closeCode).toBeUndefined();
    const s4 = await join(gw.wsUrl(second), ip());
    expect(await s1.waitClosed()).toBe(4409);
    expect(s1.closeReason).toMatch(/replaced/);
    const s5 = await join(gw.wsUrl(first), ip());
    expect(await s2.waitClosed()).toBe(4409);
    await settle();
    for (const c of [teacher, s3, s4, s5]) expect(c.closeCode).toBeUndefined();
    // one person all along: the teacher saw them join once and never leave
    expect(teacher.of('presence').filter((m) => m.event === 'left')).toEqual([]);
    await Promise.all([teacher, s3, s4, s5].map((c) => c.close()));
  });

  it('other people’s sockets do not count', async () => {
    const f = await lessonWithLinks(sql);
    const clients: TestClient[] = [];
    for (const u of ['a', 'b', 'c', 'd']) for (let i = 0; i < 3; i++) clients.push(await join(gw.wsUrl(await f.link(u, { at: clock.now() })), ip()));
    await settle();
    for (const c of clients) expect(c.closeCode).toBeUndefined();
    await Promise.all(clients.map((c) => c.close()));
  });
});

describe('cursors per person', () => {
  it('a person’s own sockets never receive their cursors; everyone else does', async () => {
    const f = await lessonWithLinks(sql);
    const mine = await f.link('me', { at: clock.now() });
    const [a1, a2, a3] = [await join(gw.wsUrl(mine), ip()), await join(gw.wsUrl(mine), ip()), await join(gw.wsUrl(mine), ip())];
    const b = await join(gw.wsUrl(await f.link('other', { at: clock.now() })), ip());
    a1.send({ type: 'cursor', x: 1, y: 1 });
    a2.send({ type: 'cursor', x: 2, y: 2 });
    await b.waitFor((m) => m.type === 'cursor' && m.x === 2, 'the second cursor');
    b.send({ type: 'cursor', x: 9, y: 9 });
    for (const a of [a1, a2, a3]) await a.waitFor((m) => m.type === 'cursor' && m.x === 9, 'the other person’s cursor');
    await settle();
    for (const a of [a1, a2, a3]) expect(a.of('cursor').map((m) => m.x)).toEqual([9]);
    expect(b.of('cursor').map((m) => m.x)).toEqual([1, 2]);
    await Promise.all([a1, a2, a3, b].map((c) => c.close()));
  });

  it('cursors are budgeted per person (30 a second, bursts of 60) across their sockets, each socket well under its own limit', async () => {
    const f = await lessonWithLinks(sql);
    const mine = await f.link('me', { at: clock.now() });
    const sockets = [await join(gw.wsUrl(mine), ip()), await join(gw.wsUrl(mine), ip()), await join(gw.wsUrl(mine), ip())];
    const b = await join(gw.wsUrl(await f.link('other', { at: clock.now() })), ip());
    // 3 x 40 = 120 cursors; every socket stays under GATEWAY_MESSAGE_BURST (100)
    for (let i = 0; i < 40; i++) sockets.forEach((s, k) => s.send({ type: 'cursor', x: i, y: k }));
    b.send({ type: 'ping' });
    await b.waitType('pong');
    await settle();
    expect(b.of('cursor')).toHaveLength(60);
    for (const s of sockets) expect(s.of('error')).toEqual([]);
    clock.advance(1000); // 30 more
    for (let i = 0; i < 40; i++) sockets[0].send({ type: 'cursor', x: 1000 + i, y: 0 });
    await b.waitFor((m) => m.type === 'cursor' && m.x === 1029, 'the 30th cursor after a second');
    await settle();
    expect(b.of('cursor')).toHaveLength(90);
    await Promise.all([...sockets, b].map((c) => c.close()));
  });
});

describe('chat and board operations per person', () => {
  it('chat lines are budgeted per person (bursts of 10) whatever socket they come on; the excess gets rate_limited', async () => {
    const f = await lessonWithLinks(sql);
    const mine = await f.link('me', { at: clock.now() });
    const [a1, a2] = [await join(gw.wsUrl(mine), ip()), await join(gw.wsUrl(mine), ip())];
    const b = await join(gw.wsUrl(await f.link('other', { at: clock.now() })), ip());
    const started = Date.now();
    for (let i = 0; i < 8; i++) {
      a1.send({ type: 'chat.send', text: `one ${i}` });
      a2.send({ type: 'chat.send', text: `two ${i}` });
    }
    const refused = () => [...a1.of('error'), ...a2.of('error')];
    const deadline = Date.now() + 10_000;
    while (refused().length + b.of('chat').length < 16 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await settle();
    expect(refused().every((e) => e.code === 'rate_limited' && e.ref === 'chat.send')).toBe(true);
    // GCRA in Redis runs on Redis' clock: 3 lines a second refill while this runs. Per socket
    // (8 each, under a burst of 10) all 16 would pass.
    const lines = b.of('chat').length;
    expect(lines).toBeGreaterThanOrEqual(10);
    expect(lines).toBeLessThanOrEqual(Math.min(15, 10 + Math.ceil(((Date.now() - started) / 1000) * 3)));
    expect(refused()).toHaveLength(16 - lines);
    await Promise.all([a1, a2, b].map((c) => c.close()));
  });

  it('board operations are budgeted per person (bursts of 60), refused with board.reject, and the admitted ones keep their order', async () => {
    const f = await lessonWithLinks(sql);
    const mine = await f.link('me', { role: 'teacher', at: clock.now() });
    const [a1, a2] = [await join(gw.wsUrl(mine), ip()), await join(gw.wsUrl(mine), ip())];
    const started = Date.now();
    for (let i = 0; i < 40; i++) {
      for (const [k, a] of [a1, a2].entries()) a.send({ type: 'board.op', ref: `r${k}-${i}`, op: { type: 'element.add', elements: [rect(`e${k}-${i}`, { x: i })] } });
    }
    const answered = (c: TestClient) => c.messages.filter((m) => m.type === 'board.ack' || m.type === 'board.reject');
    const deadline = Date.now() + 15_000;
    while (answered(a1).length + answered(a2).length < 80 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const acks = [...a1.of('board.ack'), ...a2.of('board.ack')];
    const rejects = [...a1.of('board.reject'), ...a2.of('board.reject')];
    // 60 at once, and what Redis' clock refills at 20 a second while they are decided. Per
    // socket (40 each, under a burst of 60) all 80 would pass.
    expect(acks.length).toBeGreaterThanOrEqual(60);
    expect(acks.length).toBeLessThanOrEqual(Math.min(79, 60 + Math.ceil(((Date.now() - started) / 1000) * 20)));
    expect(acks.length + rejects.length).toBe(80);
    for (const r of rejects) expect(r).toMatchObject({ code: 'rate_limited', message: expect.stringMatching(/board operations/) });
    for (const a of [a1, a2]) {
      const seqs = a.of('board.ack').map((m) => m.seq as number);
      expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
      const refs = a.of('board.ack').map((m) => Number(String(m.ref).split('-')[1]));
      expect(refs).toEqual([...refs].sort((x, y) => x - y));
    }
    await Promise.all([a1, a2].map((c) => c.close()));
  });
});
