import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { eventsOf } from '../helpers/lessons.js';
import { join } from './helpers/client.js';
import { lessonRow, lessonWithLinks, sessionsOf } from './helpers/fixtures.js';
import { startTestGateway, type TestGateway } from './helpers/gateway.js';
import { isolatedEnv } from '../helpers/isolation.js';
import { eventually } from '../helpers/wait.js';
import { spawnRedis } from './helpers/processes.js';

/**
 * A Redis outage of any length loses no billing for people
 * who stayed connected to a live gateway, starts no second session, sends no
 * second lesson.started, makes no zero-length session. A redis-server of our
 * own is killed and started again (empty); two in-process gateways share a
 * ManualClock, so the outage lasts as long as the test says (40 s, 120 s)
 * without the test waiting for it. SESSION_IDLE_SECONDS 2, the harshest case:
 * a lesson taken for empty would end at once.
 *
 * The nodes' Redis clients try to reconnect every 50 ms instead of ioredis's growing waits (up
 * to 2 s): a command sent while Redis is away fails once three reconnections failed
 * (maxRetriesPerRequest 2, src/redis.ts), in 150 ms instead of seconds, and the nodes are back
 * within 50 ms of the restart. The outage's length is the clock's; only these waits change.
 */
let redis = await spawnRedis();
const clock = new ManualClock(new Date('2026-03-02T09:00:00Z'));
const env = { ...(await isolatedEnv()), REDIS_URL: redis.url, SESSION_IDLE_SECONDS: '2' };
const quickReconnect = { retryStrategy: () => 50 };
const n1 = await startTestGateway({ env, clock, redis: quickReconnect });
const n2 = await startTestGateway({ env, clock, redis: quickReconnect });
for (const n of [n1, n2]) {
  n.deps.redis.on('error', () => undefined); // killed on purpose below
  n.redis.on('error', () => undefined);
}
const { sql } = n1.deps;
const sec = (s: number) => s * 1000;

async function redisReady(nodes: TestGateway[]) {
  await eventually(async () => nodes.every((n) => n.redis.status === 'ready' && n.deps.redis.status === 'ready'), 'gateways reconnected to Redis', 15_000);
}

/** Moves the clock while Redis is up, renewing both leases as often as the nodes would (a lease/3). */
async function advance(ms: number) {
  for (let left = ms; left > 0; left -= 3000) {
    clock.advance(Math.min(3000, left));
    await run(['heartbeat']);
  }
}

/** Every maintenance job of both nodes, in the order given. */
async function run(jobs: ('heartbeat' | 'flush' | 'sweep')[]) {
  for (const job of jobs) {
    for (const n of [n1, n2]) {
      const m = n.maintenance;
      await m.guard(job, () => m[job]());
      await n.settle();
    }
  }
}

/**
 * Redis comes back empty; the nodes re-register their sockets (after `sweepsFirst`, the worst
 * order: every node's sweep before any heartbeat noticed the loss), then 20 s pass: 11 s to
 * get past the rebuild window and the grace, 9 s more, each with its flushes.
 */
async function redisBackThen20s(opts: { sweepsFirst: boolean }) {
  redis = await spawnRedis(redis.port);
  await redisReady([n1, n2]);
  if (opts.sweepsFirst) {
    // the snapshot heartbeat is older than the orphan limit, the lesson looks empty to Redis
    expect(await n1.redis.exists('gw:epoch', 'gw:nodes')).toBe(0); // empty
    await run(['sweep', 'flush', 'sweep']);
  }
  await run(['heartbeat', 'flush', 'sweep']); // the nodes re-register their sockets (and report departures)
  await advance(sec(11)); // past the rebuild window and the grace
  await run(['flush', 'sweep']);
  await advance(sec(9));
  await run(['flush']);
}

describe('Redis down, then back empty, while everyone stays', () => {
  for (const downSeconds of [40, 120]) {
    it(`down ${downSeconds} s: the same session goes on, billed to the second, and the sweepers wait for the gateways to re-register`, async () => {
      const f = await lessonWithLinks(sql, { minutes: 100 });
      const a = await join(n1.wsUrl(await f.link('a', { at: clock.now() })));
      const b = await join(n2.wsUrl(await f.link('b', { at: clock.now() })));
      await Promise.all([n1.settle(), n2.settle()]);
      const [session] = await sessionsOf(sql, f.lesson.id);
      await advance(sec(10));
      await run(['flush', 'sweep']); // the last snapshot heartbeat before the outage
      await redis.kill();
      clock.advance(sec(downSeconds / 2));
      await run(['heartbeat', 'flush', 'sweep']); // all fail: Redis is away
      clock.advance(sec(downSeconds / 2));
      await redisBackThen20s({ sweepsFirst: true });
      await a.close();
      await b.close();
      await Promise.all([n1.settle(), n2.settle()]);
      await run(['flush']);

      const total = 10 + downSeconds + 20;
      const sessions = await sessionsOf(sql, f.lesson.id);
      expect(sessions).toHaveLength(1);
      expect(sessions[0]).toMatchObject({ id: session.id, seconds: total, ended_at: null });
      expect((await lessonRow(sql, f.lesson.id)).billed_seconds).toBe(total);
      expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(1);
      expect(await eventsOf(sql, f.partner.id, 'lesson.ended')).toHaveLength(0);
      // and the rules still hold afterwards: nobody there, the idle end follows
      await advance(sec(3));
      await run(['flush', 'sweep']);
      const ended = await eventsOf(sql, f.partner.id, 'lesson.ended');
      expect(ended.map((e) => e.data.minutes)).toEqual([Math.floor(total / 60)]);
    }, 90_000);
  }
});

describe('a departure while Redis is down', () => {
  it('is billed until the person left, not until Redis came back (the node reports it; the rebuilt meter pauses then)', async () => {
    const f = await lessonWithLinks(sql, { minutes: 100 });
    const a = await join(n1.wsUrl(await f.link('a', { at: clock.now() })));
    const b = await join(n2.wsUrl(await f.link('b', { at: clock.now() })));
    await Promise.all([n1.settle(), n2.settle()]);
    await advance(sec(10));
    await run(['flush', 'sweep']);

    await redis.kill();
    clock.advance(sec(15));
    await b.close(); // Bob leaves 15 s into the outage: Ann is alone from here on
    await n2.settle();
    clock.advance(sec(45));
    await run(['heartbeat', 'flush', 'sweep']); // all fail: Redis is away
    await redisBackThen20s({ sweepsFirst: true }); // Bob's departure is reported then

    const [s] = await sessionsOf(sql, f.lesson.id);
    expect(s).toMatchObject({ seconds: 25, ended_at: null }); // 10 s before the outage + 15 s into it
    expect((await lessonRow(sql, f.lesson.id)).billed_seconds).toBe(25);
    expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(1);
    await a.close();
    await n1.settle();
  }, 90_000);
});

describe('Redis lost while a session starts', () => {
  it('between the session row and its meter in Redis: the whole session is billed, not only what followed the outage', async () => {
    const f = await lessonWithLinks(sql, { minutes: 100 });
    const a = await join(n1.wsUrl(await f.link('a', { at: clock.now() })));
    const bobLink = await f.link('b', { at: clock.now() });
    // The start transaction waits for the lesson's row lock, held here until Redis is gone: the
    // session row commits while Redis cannot take the session (the narrow window CI once hit).
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = sql.begin(async (tx) => {
      await tx`SELECT 1 FROM lessons WHERE id = ${f.lesson.id} FOR NO KEY UPDATE`;
      locked();
      await released;
    });
    await isLocked;
    const b = await join(n2.wsUrl(bobLink)); // two present: the start waits for the lock
    await redis.kill();
    release();
    await holder;
    await eventually(async () => (await sessionsOf(sql, f.lesson.id)).length === 1, 'the session row');
    clock.advance(sec(20)); // Ann and Bob stay through the outage
    await redisBackThen20s({ sweepsFirst: false });
    await a.close();
    await b.close();
    await Promise.all([n1.settle(), n2.settle()]);
    await run(['flush']);

    const sessions = await sessionsOf(sql, f.lesson.id);
    expect(sessions).toHaveLength(1);
    expect(sessions[0]).toMatchObject({ seconds: 40, ended_at: null }); // together from the start: 20 s of outage + 20 s after
    expect((await lessonRow(sql, f.lesson.id)).billed_seconds).toBe(40);
    expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(1);
  }, 90_000);
});
