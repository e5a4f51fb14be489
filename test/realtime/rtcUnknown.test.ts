import { describe, expect, it } from 'vitest';
import { join } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';
import { spawnGateway } from './helpers/processes.js';

/**
 * `rtc.*` to someone who is not in the lesson answers `error` `not_found`
 * (docs/protocol.md, "Video call"), whichever node the people are on:
 * node A runs here, node B is a real gateway process on the same database and Redis.
 */
const a = await startTestGateway();
const b = await spawnGateway(a.env);

describe('rtc.* to an unknown person', () => {
  it('answers not_found for an id of nobody, of someone in another lesson, or of someone who left; relays, in order, to someone on another node', { timeout: 30_000 }, async () => {
    const f = await lessonWithLinks(a.deps.sql, { mode: 'full' });
    const other = await lessonWithLinks(a.deps.sql, { mode: 'full' });
    const t = await join(a.wsUrl(await f.link('t', { role: 'teacher' })));
    const s = await join(b.wsUrl(await f.link('s')));
    const x = await join(b.wsUrl(await other.link('x')));
    const [sid, xid] = [s, x].map((c) => c.of('welcome')[0].you.id as string);

    t.send({ type: 'rtc.offer', to: 'AAAAAAAAAAAAAAAA', sdp: 'v=0' });
    expect(await t.waitType('error')).toMatchObject({ type: 'error', code: 'not_found', ref: 'rtc.offer' });
    t.send({ type: 'rtc.ice', to: xid, candidate: { candidate: 'candidate:1' } });
    expect(await t.waitFor((m) => m.type === 'error' && m.ref === 'rtc.ice', 'not_found for rtc.ice')).toMatchObject({ code: 'not_found' });
    expect(x.of('rtc.ice')).toEqual([]);

    // a person who arrives is found at once, and a socket's signals arrive in the order sent
    const late = await join(b.wsUrl(await f.link('late')));
    const lid = late.of('welcome')[0].you.id as string;
    t.send({ type: 'rtc.offer', to: lid, sdp: 'v=0 first' });
    for (let i = 0; i < 5; i++) t.send({ type: 'rtc.ice', to: sid, candidate: { candidate: `candidate:${i}` } });
    expect(await late.waitType('rtc.offer')).toMatchObject({ sdp: 'v=0 first' });
    await s.waitFor(() => s.of('rtc.ice').length === 5, 'five candidates');
    expect(s.of('rtc.ice').map((m) => m.candidate.candidate)).toEqual([0, 1, 2, 3, 4].map((i) => `candidate:${i}`));

    // someone who left: not_found once they are no longer present
    await late.close();
    const errors = () => t.of('error').filter((m) => m.ref === 'rtc.answer').length;
    await new Promise<void>((resolve, reject) => {
      const deadline = Date.now() + 10_000;
      const tick = () => {
        if (errors() > 0) return resolve();
        if (Date.now() > deadline) return reject(new Error('no not_found for a person who left'));
        t.send({ type: 'rtc.answer', to: lid, sdp: 'v=0' });
        setTimeout(tick, 300);
      };
      tick();
    });
    expect(t.of('error').every((m) => m.code === 'not_found')).toBe(true);
    await Promise.all([t, s, x].map((c) => c.close()));
  });
});
