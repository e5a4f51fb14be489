import { afterAll, describe, expect, it } from 'vitest';
import type { MeterSeed } from '../../src/metering/meters.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { RedisPresence } from '../../realtime/presence/RedisPresence.js';
import type { PublicPerson } from '../../realtime/presence/Presence.js';
import { makeDeps } from '../helpers/deps.js';

/**
 * The Presence contract against a real Redis (the Lua scripts), without a
 * gateway: the rules every node relies on.
 */
const deps = makeDeps();
afterAll(() => deps.close());
const seeds = new Map<string, MeterSeed>();
const presence = new RedisPresence(deps.redis, {
  namespace: `gwtest-${randomBase62(6)}:`,
  idleMs: 300_000,
  leaseMs: 10_000,
  flushMs: 5_000,
  graceMs: 7_000,
  startRetryMs: 10_000,
  loadSeed: async (lessonId) => seeds.get(lessonId) ?? { seq: 0, sessionId: null, accMs: 0, runningSince: null, emptySince: null, confirmedAt: null },
});
const T = 1_800_000_000_000;
const person = (name: string): PublicPerson => ({ id: `pub-${name}`, name, role: 'student' });
const lesson = () => `lsn_${randomBase62(10)}`;
const join = (l: string, conn: string, who: string, now: number, node = 'n1') =>
  presence.join(l, { now, node, conn, person: `h-${who}`, info: person(who), rejoin: false });

describe('Presence (Redis)', () => {
  it('counts distinct people, not connections, and returns each transition once', async () => {
    const l = lesson();
    const a1 = await join(l, 'c1', 'ann', T);
    expect(a1).toMatchObject({ first: true, announce: true, count: 1, effects: [] });
    const a2 = await join(l, 'c2', 'ann', T + 1000);
    expect(a2).toMatchObject({ first: false, announce: false, count: 1, effects: [] });
    const b = await join(l, 'c3', 'bob', T + 2000);
    expect(b.effects).toEqual(['start']);
    expect(b.meter).toMatchObject({ since: T + 2000, startAt: T + 2000, sessionId: null });
    expect(b.people.map((p) => p.name).sort()).toEqual(['ann', 'bob']);
    await presence.setSession(l, 42, T + 2000, 0, T + 2100);

    expect(await presence.leave(l, 'c1', T + 5000)).toMatchObject({ last: false, count: 2, effects: [] });
    const left = await presence.leave(l, 'c2', T + 12_500);
    expect(left).toMatchObject({ last: true, person: person('ann'), count: 1, effects: ['pause'] });
    expect(left!.meter).toMatchObject({ sessionId: 42, accMs: 10_500, since: null, pausedAt: T + 12_500 });
    const empty = await presence.leave(l, 'c3', T + 20_000);
    expect(empty!.effects).toEqual(['empty']);
    expect(empty!.meter!.emptySince).toBe(T + 20_000);
    expect(await presence.leave(l, 'c3', T + 21_000)).toBeUndefined();
  });

  it('gives the start of a session to exactly one of many racing arrivals', async () => {
    const l = lesson();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => join(l, `c${i}`, `p${i}`, T, i % 2 ? 'n1' : 'n2')));
    expect(results.filter((r) => r.effects.includes('start'))).toHaveLength(1);
    expect(Math.max(...results.map((r) => r.count))).toBe(20);
  });

  it('ends an idle session on the next arrival when no sweeper did, dated when the lesson became empty', async () => {
    const l = lesson();
    await join(l, 'a', 'ann', T);
    await join(l, 'b', 'bob', T);
    await presence.setSession(l, 7, T, 0, T);
    await presence.leave(l, 'a', T + 60_000);
    await presence.leave(l, 'b', T + 61_000);
    const back = await join(l, 'a2', 'ann', T + 61_000 + 300_000);
    expect(back.effects).toEqual(['ended', 'occupied']);
    expect(back.meter).toMatchObject({ endSessionId: 7, endSeconds: 60, endAt: T + 61_000, sessionId: null });
    const again = await join(l, 'b2', 'bob', T + 400_000);
    expect(again.effects).toEqual(['start']);
  });

  it('reaps a dead node once when two nodes race, dating its departures at its lease expiry', async () => {
    const l = lesson();
    const dead = `dead-${randomBase62(4)}`;
    await presence.heartbeat(dead, T);
    await join(l, 'x', 'ann', T, dead);
    await join(l, 'y', 'bob', T, 'alive');
    const expiry = T + 10_000;
    const [r1, r2] = await Promise.all([presence.reap(dead, T + 13_000), presence.reap(dead, T + 13_000)]);
    const reaped = [...r1, ...r2];
    expect(reaped).toHaveLength(1);
    expect(reaped[0]).toMatchObject({ lessonId: l, count: 1, effects: ['pause'], left: [person('ann')] });
    expect(reaped[0].meter).toMatchObject({ pausedAt: expiry, accMs: expiry - T });
  });

  it('leaves a node alone that renewed its lease in time, and tells a node whose lease Redis lost', async () => {
    const node = `n-${randomBase62(4)}`;
    expect((await presence.heartbeat(node, T)).alive).toBe(false); // first heartbeat: no lease yet
    expect((await presence.heartbeat(node, T + 3000)).alive).toBe(true);
    expect(await presence.reap(node, T + 12_000)).toEqual([]); // expires at T + 13 s
    const other = await presence.heartbeat(`w-${randomBase62(4)}`, T + 14_000);
    expect(other.expired).toContain(node);
  });

  it('lets one node per interval claim the periodic flush of a lesson', async () => {
    const l = lesson();
    await join(l, 'a', 'ann', T);
    const [t1, t2] = await Promise.all([presence.tick([l], T + 1000), presence.tick([l], T + 1000)]);
    expect([t1[0].due, t2[0].due].filter(Boolean)).toHaveLength(1);
    expect((await presence.tick([l], T + 2000))[0].due).toBe(false);
    expect((await presence.tick([l], T + 6000))[0].due).toBe(true);
  });

  it('rebuilds a lost lesson from what Postgres knew: a running meter keeps running through re-registration', async () => {
    const l = lesson();
    seeds.set(l, { seq: 5, sessionId: 99, accMs: 30_000, runningSince: new Date(T), emptySince: null, confirmedAt: new Date(T + 9000) });
    const a = await presence.join(l, { now: T + 10_000, node: 'n1', conn: 'a', person: 'h-ann', info: person('ann'), rejoin: true });
    expect(a).toMatchObject({ announce: false, effects: [] });
    expect(a.meter).toMatchObject({ sessionId: 99, accMs: 30_000, since: T, seededAt: T + 10_000 });
    const b = await presence.join(l, { now: T + 11_000, node: 'n2', conn: 'b', person: 'h-bob', info: person('bob'), rejoin: true });
    expect(b.effects).toEqual([]); // already running since T: no new start, no gap
    const settled = await presence.tick([l], T + 20_000);
    expect(settled[0].meter).toMatchObject({ since: T, seededAt: null });
  });
});
