import { describe, expect, it } from 'vitest';
import type { MeterSeed } from '../../src/metering/meters.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { rebuildMs, renewMs } from '../../src/metering/rules.js';
import type { Presence, PresenceOptions, PublicPerson } from '../../realtime/presence/Presence.js';
import { RUNS_KEPT } from '../../realtime/presence/lua.js';
import { runsOf } from '../../realtime/presence/MeterMachine.js';

/** One Presence under test, and a way to make it lose its state (a Redis restart). */
export interface PresenceHarness {
  presence: Presence;
  lose(): Promise<void>;
}
export type PresenceFactory = (opts: PresenceOptions) => PresenceHarness;

const OPTS = { idleMs: 300_000, leaseMs: 10_000, flushMs: 5_000, graceMs: 7_000, startRetryMs: 10_000 };
const T = 1_800_000_000_000;
const person = (name: string): PublicPerson => ({ id: `pub-${name}`, name, role: 'student' });
const lesson = () => `lsn_${randomBase62(10)}`;
const NO_SEED: MeterSeed = { seq: 0, sessionId: null, accMs: 0, runningSince: null, emptySince: null, confirmedAt: null };

/**
 * The Presence contract (realtime/presence/Presence.ts), run against every
 * implementation: RedisPresence (the Lua) and InMemoryPresence (the same
 * state machine in TypeScript). What every gateway node relies on; that both
 * pass it is what proves they agree.
 */
export function presenceSuite(name: string, factory: PresenceFactory): void {
  /** A fresh presence whose state began an hour before T (the rebuild window is long over). */
  async function fresh(started = T - 3_600_000) {
    const seeds = new Map<string, MeterSeed>();
    const h = factory({ ...OPTS, loadSeed: async (l) => seeds.get(l) ?? NO_SEED });
    await h.presence.heartbeat('boot', started);
    const p = h.presence;
    const join = (l: string, conn: string, who: string, now: number, node = 'n1', rejoin = false) =>
      p.join(l, { now, node, conn, person: `h-${who}`, info: person(who), rejoin });
    /** Ann and Bob in a new lesson from T, session `sessionId` bound: a running meter (conns 'a', 'b'). */
    const running = async (sessionId: number) => {
      const l = lesson();
      await join(l, 'a', 'ann', T);
      await join(l, 'b', 'bob', T);
      await p.setSession(l, sessionId, T, 0, T);
      return l;
    };
    return { ...h, p, seeds, join, running };
  }

  describe(`Presence (${name})`, () => {
    it('says whether another node has connections in the lesson when it decides an arrival or a departure (only then must the event cross the bus)', async () => {
      const { p, join } = await fresh();
      const l = lesson();
      expect(await join(l, 'a1', 'ann', T, 'na')).toMatchObject({ first: true, remote: false });
      expect(await join(l, 'b1', 'bob', T + 1, 'na')).toMatchObject({ first: true, remote: false });
      // Cid on node b: node a has connections there
      expect(await join(l, 'c1', 'cid', T + 2, 'nb')).toMatchObject({ first: true, remote: true });
      // Ann's second tab on node b: a's Bob and b's Cid are elsewhere for either
      expect(await join(l, 'a2', 'ann', T + 3, 'nb')).toMatchObject({ first: false, remote: true });
      expect(await p.leave(l, 'a1', T + 4)).toMatchObject({ last: false, remote: true });
      expect(await p.leave(l, 'b1', T + 5)).toMatchObject({ last: true, remote: true });
      // node a has nobody left: node b's departures concern node b alone
      expect(await p.leave(l, 'c1', T + 6)).toMatchObject({ last: true, remote: false });
      expect(await p.leave(l, 'a2', T + 7)).toMatchObject({ last: true, remote: false });
    });

    it('forgets a participant.joined claim its node could not record, only that claim, and then announces the next arrival, first or not', async () => {
      const { p, join } = await fresh();
      const l = lesson();
      expect(await join(l, 'c1', 'ann', T)).toMatchObject({ announce: true });
      await p.forgetJoined(l, 'h-ann', T - 1); // another claim: kept
      expect(await join(l, 'c2', 'ann', T + 1000)).toMatchObject({ first: false, announce: false });
      await p.forgetJoined(l, 'h-ann', T); // the claim made at T: forgotten
      // Ann is still present (her first socket's node is draining): her next arrival is announced anyway
      expect(await join(l, 'c3', 'ann', T + 2000)).toMatchObject({ first: false, announce: true });
      expect(await join(l, 'c4', 'ann', T + 3000)).toMatchObject({ announce: false });
    });

    it('lists the pending starts a node could not write for every node, oldest first, each once, until dropped', async () => {
      const { p, lose } = await fresh();
      const [l1, l2] = [lesson(), lesson()];
      await p.keepPendingStart(l2, T + 1000);
      await p.keepPendingStart(l1, T);
      await p.keepPendingStart(l2, T + 5000); // listed again by another node: once, at its first time
      expect(await p.pendingStarts()).toEqual([l1, l2]);
      await p.dropPendingStart(l1);
      expect(await p.pendingStarts()).toEqual([l2]);
      await lose(); // Redis restarted: the pending starts went with the meters they were of
      expect(await p.pendingStarts()).toEqual([]);
    });

    it('counts distinct people, not connections, and returns each transition once', async () => {
      const { p, join } = await fresh();
      const l = lesson();
      const a1 = await join(l, 'c1', 'ann', T);
      expect(a1).toMatchObject({ first: true, announce: true, count: 1, effects: [] });
      expect(a1.meter).toMatchObject({ state: 'idle' });
      const a2 = await join(l, 'c2', 'ann', T + 1000);
      expect(a2).toMatchObject({ first: false, announce: false, count: 1, effects: [] });
      const b = await join(l, 'c3', 'bob', T + 2000);
      expect(b.effects).toEqual(['start']);
      expect(b.meter).toMatchObject({ state: 'starting', since: T + 2000, startAt: T + 2000 });
      expect(b.people.map((x) => (JSON.parse(x) as { name: string }).name).sort()).toEqual(['ann', 'bob']);
      const bound = await p.setSession(l, 42, T + 2000, 0, T + 2100);
      expect(bound.ok).toBe(true);
      expect(bound.change.meter).toMatchObject({ state: 'running', sessionId: 42, since: T + 2000, accMs: 0 });
      expect((await p.setSession(l, 43, T + 2000, 0, T + 2200)).ok).toBe(false); // bound once

      expect(await p.leave(l, 'c1', T + 5000)).toMatchObject({ last: false, count: 2, effects: [] });
      const left = await p.leave(l, 'c2', T + 12_500);
      expect(left).toMatchObject({ last: true, person: person('ann'), count: 1, effects: ['pause'] });
      expect(left!.meter).toMatchObject({ state: 'paused', sessionId: 42, accMs: 10_500, pausedAt: T + 12_500 });
      const empty = await p.leave(l, 'c3', T + 20_000);
      expect(empty!.effects).toEqual(['empty']);
      expect(empty!.meter).toMatchObject({ state: 'paused', emptySince: T + 20_000 });
      expect(await p.leave(l, 'c3', T + 21_000)).toBeUndefined();
      const back = await join(l, 'c4', 'ann', T + 30_000);
      expect(back.effects).toEqual(['occupied']);
      expect(await p.people(l)).toMatchObject({ count: 1, people: [person('ann')] });
    });

    it('ticks hundreds of lessons at once (several script calls; on a cluster, hundreds of slots in waves) and answers each lesson in the order asked', async () => {
      const { p, join } = await fresh();
      const ls = Array.from({ length: 450 }, () => lesson());
      await Promise.all(ls.map((l, i) => join(l, `c${i}`, i % 3 ? 'ann' : 'bob', T)));
      const unknown = lesson();
      const asked = [...ls.slice(0, 300), unknown, ...ls.slice(300)];
      const res = await p.tick(asked, T + 6000, { node: 'n1', until: asked.map(() => T + 6000) });
      expect(res.map((r) => r.lessonId)).toEqual(asked);
      expect(res[300]).toMatchObject({ meter: null, due: false });
      const known = res.filter((r) => r.lessonId !== unknown);
      expect(known.every((r) => r.due && r.count === 1 && r.meter !== null && r.safeUntil === T + 6000)).toBe(true);
      // claimed once: a second tick in the same interval finds none due
      expect((await p.tick(ls, T + 7000)).some((r) => r.due)).toBe(false);
    });

    it('gives the start of a session to exactly one of many racing arrivals, and the pause and the empty to one of the racing departures', async () => {
      const { p, join } = await fresh();
      const l = lesson();
      const joins = await Promise.all(Array.from({ length: 20 }, (_, i) => join(l, `c${i}`, `p${i}`, T, i % 2 ? 'n1' : 'n2')));
      expect(joins.filter((r) => r.effects.includes('start'))).toHaveLength(1);
      expect(Math.max(...joins.map((r) => r.count))).toBe(20);
      const leaves = await Promise.all(Array.from({ length: 20 }, (_, i) => p.leave(l, `c${i}`, T + 5000)));
      expect(leaves.flatMap((r) => r!.effects).sort()).toEqual(['empty', 'pause']);
    });

    it('dates a departure at the socket’s last sign of life when the gateway knows it, never later than now', async () => {
      const { p, join, running } = await fresh();
      const l = await running(5);
      // Bob's socket went silent at T + 12 s; the idle timeout found it at T + 32 s
      const left = await p.leave(l, 'b', T + 32_000, T + 12_000);
      expect(left!.meter).toMatchObject({ state: 'paused', accMs: 12_000, pausedAt: T + 12_000 });
      expect(left!.meter!.seq).toBeGreaterThanOrEqual(T + 32_000); // ordered when it was decided
      await join(l, 'b2', 'bob', T + 40_000);
      const late = await p.leave(l, 'b2', T + 45_000, T + 99_000);
      expect(late!.meter).toMatchObject({ accMs: 17_000, pausedAt: T + 45_000 });
    });

    it('ends an idle session on the next arrival when no sweeper did, dated when the lesson became empty', async () => {
      const { p, join, running } = await fresh();
      const l = await running(7);
      await p.leave(l, 'a', T + 60_000);
      await p.leave(l, 'b', T + 61_000);
      const back = await join(l, 'a2', 'ann', T + 61_000 + 300_000);
      expect(back.effects).toEqual(['ended', 'occupied']);
      expect(back.meter).toMatchObject({ state: 'idle', pendingEnd: { sessionId: 7, seconds: 60, endAt: T + 61_000, chargeAt: T + 60_000 } });
      const again = await join(l, 'b2', 'bob', T + 400_000);
      expect(again.effects).toEqual(['start']);
      expect(again.meter).toMatchObject({ state: 'starting', pendingEnd: { sessionId: 7 } });
      // the new session is bound only once the old end is written
      expect((await p.setSession(l, 8, T + 400_000, 0, T + 400_001)).ok).toBe(false);
      expect(await p.clearEnd(l, 7, T + 400_002)).toMatchObject({ pendingEnd: null });
      expect((await p.setSession(l, 8, T + 400_000, 0, T + 400_003)).ok).toBe(true);
    });

    it('lets the idle sweeper claim an end only after SESSION_IDLE_SECONDS with nobody present, once, dated when the lesson became empty', async () => {
      const { p, join, running } = await fresh();
      const l = await running(9);
      expect(await p.claimEnd(l, 9, T + 400_000)).toEqual({ kind: 'busy' }); // people present
      await p.leave(l, 'a', T + 30_000);
      await p.leave(l, 'b', T + 30_000);
      expect(await p.claimEnd(l, 9, T + 30_000 + 299_999)).toEqual({ kind: 'busy' });
      const [c1, c2] = await Promise.all([p.claimEnd(l, 9, T + 330_000), p.claimEnd(l, 9, T + 330_000)]);
      expect(c1).toMatchObject({ kind: 'end', meter: { state: 'idle', pendingEnd: { sessionId: 9, seconds: 30, endAt: T + 30_000 } } });
      expect(c2).toEqual(c1); // the same pending end: Postgres' end is idempotent
      expect(await p.claimEnd(l, 8, T + 330_000)).toEqual({ kind: 'orphan' }); // a session Redis does not know, nobody here
      expect(await p.clearEnd(l, 9, T + 330_001)).toMatchObject({ state: 'idle', pendingEnd: null });
      expect(await p.clearEnd(l, 9, T + 330_002)).toBeNull();
      expect(await p.people(l)).toEqual({ count: 0, seq: 0, people: [] }); // forgotten
    });

    it('reaps a dead node once when two nodes race, dating its departures when its next renewal was due (not at the lease expiry)', async () => {
      const { p, join } = await fresh();
      const l = lesson();
      const dead = `dead-${randomBase62(4)}`;
      await p.heartbeat(dead, T);
      await join(l, 'x', 'ann', T, dead);
      await join(l, 'y', 'bob', T, 'alive');
      expect(await p.reap(dead, T + 9_000)).toEqual([]); // its lease runs to T + 10 s
      const [r1, r2] = await Promise.all([p.reap(dead, T + 13_000), p.reap(dead, T + 13_000)]);
      const reaped = [...r1, ...r2];
      expect(reaped).toHaveLength(1);
      expect(reaped[0]).toMatchObject({ lessonId: l, count: 1, effects: ['pause'], left: [person('ann')] });
      const due = T + renewMs(OPTS.leaseMs);
      expect(reaped[0].meter).toMatchObject({ state: 'starting', pausedAt: due, accMs: due - T });
    });

    /** one lesson with Ann on node na and Bob on node nb, both nodes alive at T */
    async function annOnNaBobOnNb() {
      const { p, join } = await fresh();
      const l = lesson();
      await p.heartbeat('na', T);
      await p.heartbeat('nb', T);
      await join(l, 'x', 'ann', T, 'na');
      await join(l, 'y', 'bob', T, 'nb');
      return { p, join, l };
    }

    it('tells a flushing node how far presence is certain: up to the next renewal due of every node with people in the lesson', async () => {
      const { p, join, l } = await annOnNaBobOnNb();
      await p.heartbeat('na', T + 3000); // nb renews no more (it died)
      await p.heartbeat('na', T + 6000);
      const [r] = await p.tick([l], T + 8000);
      expect(r).toMatchObject({ due: true, safeUntil: T + renewMs(OPTS.leaseMs) });
      await p.heartbeat('nb', T + 12_000); // it was only slow
      await p.heartbeat('na', T + 12_000);
      expect((await p.tick([l], T + 13_000))[0]).toMatchObject({ due: true, safeUntil: T + 13_000 });
    });

    it('tells a flushing node how far presence is certain: no further than any node with people in the lesson vouched at its last tick', async () => {
      const { p, join, l } = await annOnNaBobOnNb();
      await p.heartbeat('na', T + 3000);
      await p.heartbeat('nb', T + 3000);
      // nb has a silent socket: it vouches for its sockets only up to T + 1.5 s (and does not claim the flush)
      expect((await p.tick([l], T + 4000, { node: 'nb', until: [T + 1500] }))[0]).toMatchObject({ due: true, safeUntil: T + 1500 });
      // na claims the next flush: nb's word still holds (until nb ticks again)
      const [r] = await p.tick([l], T + 9000, { node: 'na', until: [T + 9000] });
      expect(r).toMatchObject({ due: true, safeUntil: T + 1500 });
      // nb's socket closed late, dated T + 1.5 s: nb has nobody left, so its word no longer counts
      await p.leave(l, 'y', T + 10_000, T + 1500);
      await p.heartbeat('na', T + 12_000);
      expect((await p.tick([l], T + 15_000, { node: 'na', until: [T + 14_000] }))[0]).toMatchObject({ due: true, safeUntil: T + 14_000 });
      // a lesson is forgotten with what was vouched for it
      const forgotten = lesson();
      await join(forgotten, 'z', 'cat', T, 'na');
      await p.tick([forgotten], T + 1000, { node: 'na', until: [T + 500] });
      await p.leave(forgotten, 'z', T + 2000);
      await join(forgotten, 'w', 'dan', T + 3000, 'na');
      expect((await p.tick([forgotten], T + 9000))[0]).toMatchObject({ due: true, safeUntil: T + 9000 });
    });

    it('leaves a node alone that renewed its lease in time, and tells a node whose lease was lost', async () => {
      const { p } = await fresh();
      const node = `n-${randomBase62(4)}`;
      expect((await p.heartbeat(node, T)).alive).toBe(false); // first heartbeat: no lease yet
      expect((await p.heartbeat(node, T + 3000)).alive).toBe(true);
      expect(await p.reap(node, T + 12_000)).toEqual([]); // expires at T + 13 s
      const other = await p.heartbeat(`w-${randomBase62(4)}`, T + 14_000);
      expect(other.expired).toContain(node);
      await p.leaveNode(node);
      expect((await p.heartbeat(`w2-${randomBase62(4)}`, T + 15_000)).expired).not.toContain(node);
    });

    it('lets one node per interval claim the periodic flush of a lesson, and hands an unconfirmed start to one node again', async () => {
      const { p, join } = await fresh();
      const l = lesson();
      await join(l, 'a', 'ann', T);
      const [t1, t2] = await Promise.all([p.tick([l], T + 1000), p.tick([l], T + 1000)]);
      expect([t1[0].due, t2[0].due].filter(Boolean)).toHaveLength(1);
      expect((await p.tick([l], T + 2000))[0].due).toBe(false);
      expect((await p.tick([l], T + 6000))[0]).toMatchObject({ due: true, count: 1, effects: [] });
      expect(await p.tick([lesson()], T)).toEqual([expect.objectContaining({ meter: null, due: false })]);

      await join(l, 'b', 'bob', T + 7000); // start at T + 7 s, never bound (the node died)
      expect((await p.tick([l], T + 16_000))[0].effects).toEqual([]);
      const [r1, r2] = await Promise.all([p.tick([l], T + 17_000), p.tick([l], T + 17_000)]);
      expect([...r1[0].effects, ...r2[0].effects]).toEqual(['start']);
    });

    it('stops an orphan session (nobody present) at the last confirmed presence, and leaves one alone that someone is in', async () => {
      const { p, join, seeds } = await fresh();
      const l = lesson();
      seeds.set(l, { seq: 3, sessionId: 11, accMs: 20_000, runningSince: new Date(T - 60_000), emptySince: null, confirmedAt: new Date(T - 30_000) });
      const m = await p.orphan(l, 11, T);
      expect(m).toMatchObject({ state: 'paused', sessionId: 11, accMs: 50_000, pausedAt: T - 30_000, emptySince: T - 30_000, seededAt: null });
      expect(await p.orphan(l, 12, T)).toBeUndefined(); // not the session Redis knows

      const busy = lesson();
      seeds.set(busy, { seq: 3, sessionId: 12, accMs: 0, runningSince: new Date(T - 60_000), emptySince: null, confirmedAt: new Date(T - 30_000) });
      await join(busy, 'a', 'ann', T, 'n1', true);
      expect(await p.orphan(busy, 12, T + 1000)).toBeUndefined();
    });

    it('ends the session of a deleted lesson at archived_at, keeps a start pending since before it (paused there), and archives a lesson without a session quietly', async () => {
      const { p, join, running } = await fresh();
      const l = await running(21);
      const m = await p.archiveEnd(l, T + 42_500, T + 43_000);
      expect(m).toMatchObject({ state: 'idle', pendingEnd: { sessionId: 21, seconds: 42, endAt: T + 42_500, chargeAt: T + 42_500 } });
      expect(await p.archiveEnd(l, T + 42_500, T + 44_000)).toEqual(m); // asked again: the same end

      // a start pending since before the deletion (its session not yet made): kept, metered up to
      // archived_at only, so that its session can be made and ended there
      const pending = lesson();
      await join(pending, 'a', 'ann', T);
      await join(pending, 'b', 'bob', T);
      const kept = await p.archiveEnd(pending, T + 30_000, T + 34_000);
      expect(kept).toMatchObject({ state: 'starting', startAt: T, accMs: 30_000, since: null, pausedAt: T + 30_000, pendingEnd: null });
      expect(await p.archiveEnd(pending, T + 30_000, T + 36_000)).toEqual(kept); // asked again: the same
      expect((await p.tick([pending], T + 40_000))[0].meter).toMatchObject({ state: 'starting', accMs: 30_000 });

      // a deletion noticed late (its notice missed): what ran past archived_at before a pause, and
      // after a resume, comes off; the end's charge is dated at the deletion
      const late = await running(22);
      await join(late, 'c', 'cid', T);
      await p.leave(late, 'b', T + 40_000); // three to two: still running
      await p.leave(late, 'c', T + 45_000); // two to one: paused 15 s past the deletion
      await join(late, 'b2', 'bob', T + 47_000); // resumed
      const cut = await p.archiveEnd(late, T + 30_000, T + 50_000);
      expect(cut).toMatchObject({ state: 'idle', pendingEnd: { sessionId: 22, seconds: 30, chargeAt: T + 30_000, endAt: T + 30_000 } });

      // several pauses and resumes past the deletion: every run's time past it comes off, the
      // oldest of them too
      const cycles = await running(23);
      await p.leave(cycles, 'b', T + 28_000); // paused 2 s before the deletion: kept
      await join(cycles, 'b2', 'bob', T + 29_000);
      for (let k = 0; k < 3; k++) {
        await p.leave(cycles, `b${k + 2}`, T + 31_000 + k * 2000); // 1 s past the deletion, each time
        await join(cycles, `b${k + 3}`, 'bob', T + 32_000 + k * 2000);
      }
      const cycled = await p.archiveEnd(cycles, T + 30_000, T + 38_000);
      expect(cycled).toMatchObject({ state: 'idle', pendingEnd: { sessionId: 23, seconds: 29, chargeAt: T + 30_000, endAt: T + 30_000 } });
      // someone flapping keeps the meter bounded: the last RUNS_KEPT runs, oldest first
      const flap = await running(24);
      for (let k = 0; k < RUNS_KEPT + 5; k++) {
        await p.leave(flap, k === 0 ? 'b' : `f${k}`, T + 1000 + k * 1000);
        await join(flap, `f${k + 1}`, 'bob', T + 1500 + k * 1000);
      }
      const runs = runsOf((await p.tick([flap], T + 60_000))[0].meter!);
      expect(runs).toHaveLength(RUNS_KEPT);
      expect(runs.at(-1)).toEqual({ from: T + 500 + (RUNS_KEPT + 4) * 1000, to: T + 1000 + (RUNS_KEPT + 4) * 1000 });

      // a start decided at or after the deletion: dropped
      const other = lesson();
      await join(other, 'a', 'ann', T + 1000);
      await join(other, 'b', 'bob', T + 1000); // a start pending, no session yet
      expect(await p.archiveEnd(other, T + 1000, T + 1000)).toBeUndefined();
      expect((await p.tick([other], T + 2000))[0].meter).toMatchObject({ state: 'idle', pendingEnd: null }); // the start is dropped
    });

    it('rebuilds a lost lesson from what Postgres knew: a running meter keeps running through re-registration', async () => {
      const { p, seeds, join } = await fresh();
      const l = lesson();
      seeds.set(l, { seq: 5, sessionId: 99, accMs: 30_000, runningSince: new Date(T), emptySince: null, confirmedAt: new Date(T + 9000) });
      const a = await join(l, 'a', 'ann', T + 10_000, 'n1', true);
      expect(a).toMatchObject({ announce: false, effects: [] });
      expect(a.meter).toMatchObject({ state: 'running', sessionId: 99, accMs: 30_000, since: T, seededAt: T + 10_000 });
      const b = await join(l, 'b', 'bob', T + 11_000, 'n2', true);
      expect(b.effects).toEqual([]); // already running since T: no new start, no gap
      const settled = await p.tick([l], T + 20_000);
      expect(settled[0]).toMatchObject({ effects: [], meter: { state: 'running', since: T, seededAt: null } });
    });

    it('after losing its state, decides no lesson is empty before the live nodes re-registered: no orphan stop, no idle end, no second start, no lost second', async () => {
      const { p, seeds, join, lose } = await fresh();
      const l = lesson();
      const quiet = lesson();
      // Ann and Bob are in l since T - 100 s; the last snapshot heartbeat was 40 s ago (Redis was down that long)
      seeds.set(l, { seq: 5, sessionId: 31, accMs: 0, runningSince: new Date(T - 100_000), emptySince: null, confirmedAt: new Date(T - 40_000) });
      // nobody is in `quiet` any more: its node died during the outage
      seeds.set(quiet, { seq: 5, sessionId: 32, accMs: 0, runningSince: new Date(T - 100_000), emptySince: null, confirmedAt: new Date(T - 40_000) });
      await lose();
      // Redis is back, empty; a sweeper runs before any node re-registered
      expect(await p.orphan(l, 31, T)).toBeUndefined();
      expect(await p.orphan(quiet, 32, T + 100)).toBeUndefined();
      expect(await p.claimEnd(l, 31, T + 200)).toEqual({ kind: 'busy' });
      // the nodes find their leases gone within a renewal and re-register their sockets
      expect((await p.heartbeat('n1', T + 3000)).alive).toBe(false);
      const a = await join(l, 'a', 'ann', T + 3000, 'n1', true);
      const b = await join(l, 'b', 'bob', T + 3500, 'n2', true);
      expect([...a.effects, ...b.effects]).toEqual([]); // no start, no resume: it never stopped
      expect(b.meter).toMatchObject({ state: 'running', sessionId: 31, since: T - 100_000 });
      expect(await p.orphan(l, 31, T + rebuildMs(OPTS.leaseMs) + 1000)).toBeUndefined();
      const settled = await p.tick([l], T + rebuildMs(OPTS.leaseMs) + 1000);
      expect(settled[0]).toMatchObject({ effects: [], meter: { state: 'running', since: T - 100_000, seededAt: null } });
      // after the window, a lesson nobody re-registered is an orphan, stopped at its last confirmed presence
      expect(await p.orphan(quiet, 32, T + rebuildMs(OPTS.leaseMs))).toMatchObject({ state: 'paused', pausedAt: T - 40_000, accMs: 60_000 });
    });

    it('after losing its state, pauses a rebuilt meter when the departed person left (reported by their node), not when Redis came back', async () => {
      const { p, seeds, join, lose } = await fresh();
      const seed = (sessionId: number): MeterSeed => ({ seq: 5, sessionId, accMs: 0, runningSince: new Date(T - 100_000), emptySince: null, confirmedAt: new Date(T - 40_000) });
      const [early, late, both] = [lesson(), lesson(), lesson()];
      seeds.set(early, seed(41));
      seeds.set(late, seed(42));
      seeds.set(both, seed(43));
      await lose();
      // Bob left each lesson at T - 20 s while Redis was down; his node reports it when Redis is back
      expect(await p.leave(early, 'bob-early', T + 1000, T - 20_000)).toBeUndefined(); // before anyone re-registered
      await join(early, 'a', 'ann', T + 3000, 'n1', true);
      await join(late, 'a', 'ann', T + 3000, 'n1', true);
      expect(await p.leave(late, 'bob-late', T + 3500, T - 20_000)).toBeUndefined(); // after Ann re-registered
      // nobody stayed in `both`: Ann left at T - 30 s, Bob at T - 10 s
      await p.leave(both, 'ann-both', T + 1500, T - 30_000);
      await p.leave(both, 'bob-both', T + 1600, T - 10_000);

      const after = T + 1000 + rebuildMs(OPTS.leaseMs) + 1000;
      for (const l of [early, late]) {
        const [r] = await p.tick([l], after);
        expect(r.effects).toEqual(['pause']);
        expect(r.meter).toMatchObject({ state: 'paused', pausedAt: T - 20_000, accMs: 80_000, goneAt: null });
      }
      expect(await p.orphan(both, 43, after)).toMatchObject({ state: 'paused', pausedAt: T - 10_000, accMs: 90_000, emptySince: T - 10_000 });
    });
  });
}
