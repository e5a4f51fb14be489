import { afterAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/lib/crypto.js';
import { isCluster, keySlot, masters, slotTag, type SingleRedis } from '../../src/redis.js';
import { RedisPresence } from '../../realtime/presence/RedisPresence.js';
import { renewMs } from '../../src/metering/rules.js';
import { makeDeps } from '../helpers/deps.js';
import { eventually } from '../helpers/wait.js';
import { join } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

/**
 * What only a Redis Cluster shows (the `redis-cluster` project, vitest.config.ts;
 * the shared suites run there too): the service really is on the cluster, a
 * lesson's keys are one slot and lessons spread over the masters, the bus uses
 * sharded channels, and a dead node's connections are reaped in every slot.
 */
const deps = makeDeps();
afterAll(() => deps.close());

const OPTS = { idleMs: 300_000, leaseMs: 10_000, flushMs: 5_000, graceMs: 7_000, startRetryMs: 10_000 };
const T = 1_800_000_000_000;
const NO_SEED = { seq: 0, sessionId: null, accMs: 0, runningSince: null, emptySince: null, confirmedAt: null };
const person = (name: string) => ({ id: `pub-${name}`, name, role: 'student' as const });

/** The master holding a key: the one whose KEYS pattern finds it. */
async function mastersHolding(pattern: string): Promise<Set<number>> {
  const out = new Set<number>();
  for (const m of masters(deps.redis)) if ((await m.keys(pattern)).length > 0) out.add((m as SingleRedis).options.port!);
  return out;
}

describe('on a Redis Cluster', () => {
  it('the service talks to a cluster of three masters', async () => {
    expect(isCluster(deps.redis)).toBe(true);
    await deps.redis.ping();
    expect(masters(deps.redis)).toHaveLength(3);
  });

  it('has a hash tag for every slot (the slot epochs and node sets of a lesson go in its slot)', () => {
    for (let slot = 0; slot < 16384; slot++) expect(keySlot(`gw:epoch${slotTag(slot)}`)).toBe(slot);
  });

  it("keeps each lesson's keys in one slot, and spreads lessons over the masters", async () => {
    const namespace = `gwc-${randomBase62(6)}:`;
    const p = new RedisPresence(deps.redis, { ...OPTS, namespace, loadSeed: async () => NO_SEED });
    await p.heartbeat('n1', T);
    const lessons = Array.from({ length: 12 }, () => `lsn_${randomBase62(10)}`);
    for (const l of lessons) {
      await p.join(l, { now: T, node: 'n1', conn: `c-${l}`, person: 'h-ann', info: person('ann'), rejoin: false });
    }
    const prefix = deps.config.REDIS_KEY_PREFIX;
    const used = new Set<number>();
    for (const l of lessons) {
      const keys = (await Promise.all(masters(deps.redis).map((m) => m.keys(`${prefix}${namespace}l:{${l}}:*`)))).flat();
      expect(keys.length).toBeGreaterThanOrEqual(3); // c, p, i, m at least
      expect(new Set(keys.map((k) => keySlot(k)))).toEqual(new Set([keySlot(l)]));
      for (const port of await mastersHolding(`${prefix}${namespace}l:{${l}}:m`)) used.add(port);
    }
    expect(used.size).toBeGreaterThan(1);
  });

  it('reaps a dead node in every slot it had people in, dated when its renewal was due, and its own heartbeat finishes a reap left half-way', async () => {
    const namespace = `gwc-${randomBase62(6)}:`;
    const p = new RedisPresence(deps.redis, { ...OPTS, namespace, loadSeed: async () => NO_SEED });
    await p.heartbeat('n1', T);
    await p.heartbeat('n2', T);
    const lessons = Array.from({ length: 10 }, () => `lsn_${randomBase62(10)}`);
    for (const l of lessons) {
      await p.join(l, { now: T, node: 'n1', conn: `a-${l}`, person: 'h-ann', info: person('ann'), rejoin: false });
      await p.join(l, { now: T, node: 'n2', conn: `b-${l}`, person: 'h-bob', info: person('bob'), rejoin: false });
    }
    // n1 stops renewing; n2 renews and finds it expired
    const later = T + OPTS.leaseMs + 1000;
    const { expired } = await p.heartbeat('n2', later);
    expect(expired).toEqual(['n1']);
    const reaped = await p.reap('n1', later);
    expect(reaped.map((r) => r.lessonId).sort()).toEqual([...lessons].sort());
    for (const r of reaped) {
      expect(r.left).toEqual([person('ann')]);
      expect(r.effects).toEqual(['pause']);
      expect(r.meter).toMatchObject({ pausedAt: T + renewMs(OPTS.leaseMs) });
    }
    expect(await p.reap('n1', later)).toEqual([]); // once
    for (const l of lessons) expect((await p.people(l)).people).toEqual([person('bob')]);

    // n2 dies in turn; a reaper claims it and dies before the slots are done: n2's own heartbeat,
    // back after the reap went stale, finishes it before it re-registers (nothing of n2 left behind)
    const claimAt = later + OPTS.leaseMs + 1000;
    const run = (p as unknown as { run: Record<string, (...a: (string | number)[]) => Promise<unknown[]>> }).run;
    const claim = await run.gwReapClaim(`${namespace}{nodes}`, claimAt, 'n2', 10_000);
    expect(claim.length).toBeGreaterThan(1);
    const hb = await p.heartbeat('n2', claimAt + 11_000);
    expect(hb.alive).toBe(false);
    for (const l of lessons) expect(await p.people(l)).toMatchObject({ count: 0 });
  });

  it('a node whose reap is in progress waits for its end before it re-registers (the reap would remove what it put back)', async () => {
    const namespace = `gwc-${randomBase62(6)}:`;
    const p = new RedisPresence(deps.redis, { ...OPTS, namespace, loadSeed: async () => NO_SEED });
    await p.heartbeat('n1', T);
    const l = `lsn_${randomBase62(10)}`;
    await p.join(l, { now: T, node: 'n1', conn: 'a', person: 'h-ann', info: person('ann'), rejoin: false });
    const run = (p as unknown as { run: Record<string, (...a: (string | number)[]) => Promise<unknown[]>> }).run;
    const now = T + OPTS.leaseMs + 1000;
    const [at, ...tags] = (await run.gwReapClaim(`${namespace}{nodes}`, now, 'n1', 10_000)) as string[];
    // while the reap is in progress a flush charges no further than the departures it will date (its lease is gone already)
    expect(Number(at)).toBe(T + renewMs(OPTS.leaseMs));
    expect((await p.tick([l], now))[0]).toMatchObject({ due: true, safeUntil: Number(at) });
    let answered = false;
    const hb = p.heartbeat('n1', now + 100).then((r) => ((answered = true), r));
    await new Promise((r) => setTimeout(r, 300));
    expect(answered).toBe(false);
    for (const tag of tags) await run.gwReapSlot(`${namespace}${tag}`, now, OPTS.idleMs, 'n1', at);
    await run.gwReapDone(`${namespace}{nodes}`, 'n1');
    expect((await hb).alive).toBe(false); // now it re-registers
    expect(await p.people(l)).toMatchObject({ count: 0 });
  });

  it('relays lesson messages between nodes over sharded channels (SSUBSCRIBE), not cluster-wide PUBLISH', async () => {
    const n1 = await startTestGateway();
    const n2 = await startTestGateway({ env: n1.env });
    const f = await lessonWithLinks(n1.deps.sql);
    const a = await join(n1.wsUrl(await f.link('a', { name: 'Ann' })));
    const b = await join(n2.wsUrl(await f.link('b', { name: 'Bob' })));
    await a.waitFor((m) => m.type === 'presence' && m.event === 'joined' && m.person.name === 'Bob', 'Bob joined on the other node');
    b.send({ type: 'cursor', x: 1, y: 2 });
    await a.waitFor((m) => m.type === 'cursor' && m.x === 1, 'cursor from the other node');
    const channel = `${n1.env.REDIS_KEY_PREFIX}gw:lesson:{${f.lesson.id}}`;
    await eventually(async () => {
      const sharded = (await Promise.all(masters(deps.redis).map((m) => m.call('PUBSUB', 'SHARDCHANNELS', channel) as Promise<string[]>))).flat();
      const plain = (await Promise.all(masters(deps.redis).map((m) => m.call('PUBSUB', 'CHANNELS', channel) as Promise<string[]>))).flat();
      return sharded.length === 1 && plain.length === 0;
    }, 'the lesson channel sharded on one master, no plain channel');
    await Promise.all([a.close(), b.close()]);
  }, 30_000);
});
