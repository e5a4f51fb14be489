import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileDeps } from '../helpers/deps.js';
import { eventsOf } from '../helpers/lessons.js';
import { join } from './helpers/client.js';
import { lessonRow, lessonWithLinks, sessionsOf } from './helpers/fixtures.js';
import { isolatedEnv } from '../helpers/isolation.js';
import { eventually } from '../helpers/wait.js';
import { spawnGateway, spawnRedis, type GatewayProcess } from './helpers/processes.js';

/**
 * Faults with real processes: a Redis of our own (started and killed here,
 * never the shared one) and gateway processes with short test settings:
 * lease 3 s (heartbeat 1 s), flush 1 s, SESSION_IDLE_SECONDS 2. A gateway
 * process takes seconds to start on a loaded machine, so the Redis faults
 * share one pair of nodes (each test its own lesson), and each restart test
 * hands its new process to the next test as the node that dies there.
 */
let redis = await spawnRedis();
const env = {
  ...(await isolatedEnv()),
  REDIS_URL: redis.url,
  GATEWAY_LEASE_SECONDS: '3',
  GATEWAY_METER_FLUSH_SECONDS: '1',
  SESSION_IDLE_SECONDS: '2',
};
const deps = fileDeps({ env });
deps.redis.on('error', () => undefined); // this Redis is killed on purpose below
const { sql } = deps;
const admin = () => new Redis(redis.url, { maxRetriesPerRequest: 1 });
const seconds = (ms: number) => ms / 1000;
/** Connections Redis holds for the lesson (the gateways registered them, or re-registered them after a loss). */
const registered = async (lessonId: string) => deps.redis.hlen(`gw:l:{${lessonId}}:c`).catch(() => 0);
/** The names of the people Redis holds as present in the lesson. */
const presentNames = async (lessonId: string) =>
  Object.values(await deps.redis.hgetall(`gw:l:{${lessonId}}:i`).catch(() => ({}))).map((v) => (JSON.parse(v) as { name: string }).name).sort();
/** Waits until each node logged `msg` after the mark (its log's length then): what the node noticed, not a fixed time. */
async function logged(nodes: [GatewayProcess, number][], msg: string): Promise<void> {
  await eventually(async () => nodes.every(([n, from]) => n.logs.slice(from).some((l) => l.includes(`"msg":"${msg}"`))), `"${msg}" logged`, 15_000);
}
/** Waits until a flush charged the lesson this many seconds: presence confirmed that long. */
const billedAtLeast = (lessonId: string, seconds: number) =>
  eventually(async () => (await lessonRow(sql, lessonId)).billed_seconds >= seconds, `${seconds} s billed`, 15_000);
/** The lesson's first session, once the meter started it. */
const firstSession = async (lessonId: string) => (await eventually(async () => (await sessionsOf(sql, lessonId)).length && sessionsOf(sql, lessonId), 'the session'))[0];
/**
 * Waits for billed_seconds to stop moving (the meter paused and charged). `empty`: everyone left, so
 * settled means the snapshot of the emptied lesson is written: the charge at the pause before it is
 * in (the meter applies a lesson's transitions in order), whatever the flushes wrote before.
 */
async function billedSettles(lessonId: string, opts: { empty?: boolean } = {}): Promise<number> {
  let last = -1;
  const settled = await eventually(async () => {
    const billed = (await lessonRow(sql, lessonId)).billed_seconds;
    const [m] = await sql<{ paused: boolean; empty: boolean }[]>`SELECT (running_since IS NULL) AS paused, (empty_since IS NOT NULL) AS empty FROM lesson_meters WHERE lesson_id = ${lessonId}`;
    // no row yet: no flush has written the lesson's meter (Redis went down before the first one), so
    // nothing is settled; read as paused, two early reads of 0 ended the wait before any charge landed
    const done = billed === last && m?.paused === true && (!opts.empty || m.empty);
    last = billed;
    return done ? { billed } : undefined;
  }, 'billing to settle', 15_000, 500);
  return settled.billed;
}

/** The process a test left running (the new one after a death), or a new one. */
let spare: GatewayProcess | undefined;
async function aNode(): Promise<GatewayProcess> {
  const n = spare ?? (await spawnGateway(env));
  spare = undefined;
  return n;
}
afterAll(() => spare?.stop());

describe('Redis loses its state while a lesson runs', () => {
  let n1: GatewayProcess;
  let n2: GatewayProcess;
  beforeAll(async () => {
    [n1, n2] = await Promise.all([spawnGateway(env), spawnGateway(env)]);
  });
  afterAll(async () => {
    // n1 lives on as the first node of the restarts below
    spare = n1;
    await n2?.stop();
  });

  it('after FLUSHALL the gateways re-register their live connections: same session, no second lesson.started, billing continues', async () => {
    const f = await lessonWithLinks(sql);
    const a = await join(n1.wsUrl(await f.link('a', { name: 'Ann' })));
    const b = await join(n2.wsUrl(await f.link('b', { name: 'Bob' })));
    const t0 = Date.now();
    await firstSession(f.lesson.id);
    const r = admin();
    await r.flushall();
    r.disconnect();
    // re-registration within a heartbeat
    await eventually(async () => (await registered(f.lesson.id)) === 2, 'both nodes re-registered');
    const c = await join(n1.wsUrl(await f.link('c', { name: 'Cid' })));
    expect(c.of('welcome')[0].people.map((p: any) => p.name).sort()).toEqual(['Ann', 'Bob', 'Cid']);
    await Promise.all([b.close(), c.close()]);
    const together = seconds(Date.now() - t0);
    await a.close();
    const billed = await billedSettles(f.lesson.id, { empty: true });
    expect(await sessionsOf(sql, f.lesson.id)).toHaveLength(1);
    expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(1);
    expect(Math.abs(billed - together)).toBeLessThanOrEqual(1.5);
  }, 40_000);

  it('after Redis is killed and restarted the session survives and the outage loses no billed second', async () => {
    const f = await lessonWithLinks(sql);
    const a = await join(n1.wsUrl(await f.link('a', { name: 'Ann' })));
    const b = await join(n2.wsUrl(await f.link('b', { name: 'Bob' })));
    const c = await join(n2.wsUrl(await f.link('c', { name: 'Cid' })));
    const t0 = Date.now();
    await firstSession(f.lesson.id);
    const [m1, m2] = [n1.logs.length, n2.logs.length];
    await redis.kill();
    await logged([[n1, m1], [n2, m2]], 'redis error'); // an outage: the nodes notice it
    await c.close(); // leaves while Redis is down: the node keeps the departure and retries
    await logged([[n2, m2]], 'presence unavailable at leave; will retry');
    redis = await spawnRedis(redis.port); // the handle the next test kills
    // the nodes re-registered Ann and Bob and the retried departure removed Cid (two connections alone
    // may still be Ann's and Cid's, before Bob's node re-registered him)
    await eventually(
      async () => (await registered(f.lesson.id)) === 2 && (await presentNames(f.lesson.id)).join() === 'Ann,Bob',
      're-registration and the retried departure',
      15_000,
    );
    const d = await join(n1.wsUrl(await f.link('d', { name: 'Dan' })));
    expect(d.of('welcome')[0].people.map((p: any) => p.name).sort()).toEqual(['Ann', 'Bob', 'Dan']);
    await Promise.all([b.close(), d.close()]);
    const together = seconds(Date.now() - t0);
    await a.close();
    const billed = await billedSettles(f.lesson.id, { empty: true });
    expect(await sessionsOf(sql, f.lesson.id)).toHaveLength(1);
    expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(1);
    // Ann and Bob were together all along: every second is billed; the outage loses none
    expect(billed).toBeGreaterThanOrEqual(Math.floor(together) - 1);
    expect(billed).toBeLessThanOrEqual(Math.ceil(together) + 1);
  }, 60_000);

  it('bills a departure during a Redis outage at most until Redis is back and the nodes re-registered', async () => {
    const f = await lessonWithLinks(sql);
    const a = await join(n1.wsUrl(await f.link('a')));
    const b = await join(n2.wsUrl(await f.link('b')));
    const s = await firstSession(f.lesson.id);
    // a lesson running on n1 throughout: its billing moves at each of n1's flushes, which also tick Ann's
    const marker = await lessonWithLinks(sql);
    const markers = [await join(n1.wsUrl(await marker.link('m1'))), await join(n1.wsUrl(await marker.link('m2')))];
    const [m1, m2] = [n1.logs.length, n2.logs.length];
    await redis.kill();
    await logged([[n1, m1], [n2, m2]], 'redis error'); // an outage the nodes notice
    const leftAt = Date.now();
    await b.close(); // Ann is alone from here on
    await logged([[n2, m2]], 'presence unavailable at leave; will retry');
    const restartedAt = Date.now();
    redis = await spawnRedis(redis.port); // the handle the next test kills
    const billed = await billedSettles(f.lesson.id);
    const start = s.started_at.getTime();
    expect(billed).toBeGreaterThanOrEqual(Math.floor(seconds(leftAt - start)) - 1);
    // the bound (docs/metering.md): until Redis is back, plus one heartbeat and the grace (1 s + 3 s)
    expect(billed).toBeLessThanOrEqual(Math.ceil(seconds(restartedAt - start)) + 4);
    // paused for good: a later flush of n1 (the marker's charge moved) charged Ann's lesson nothing more
    const markerBilled = (await lessonRow(sql, marker.lesson.id)).billed_seconds;
    await billedAtLeast(marker.lesson.id, markerBilled + 1);
    expect((await lessonRow(sql, f.lesson.id)).billed_seconds).toBe(billed);
    expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(1);
    await Promise.all([a.close(), ...markers.map((m) => m.close())]);
  }, 60_000);
});

describe('every process restarts', () => {
  it('ends a session idle for SESSION_IDLE_SECONDS although the node that saw it empty died and Redis was flushed', async () => {
    const n1 = await aNode();
    const f = await lessonWithLinks(sql);
    const a = await join(n1.wsUrl(await f.link('a')));
    const b = await join(n1.wsUrl(await f.link('b')));
    await firstSession(f.lesson.id);
    await a.close();
    await b.close();
    const emptySince = await eventually(async () => {
      const [m] = await sql<{ empty_since: Date | null }[]>`SELECT empty_since FROM lesson_meters WHERE lesson_id = ${f.lesson.id}`;
      return m?.empty_since ?? undefined;
    }, 'the empty moment recorded');
    await n1.kill();
    const r = admin();
    await r.flushall();
    r.disconnect();
    expect((await sessionsOf(sql, f.lesson.id))[0].ended_at).toBeNull();
    const n2 = await spawnGateway(env);
    const ended = await eventually(async () => (await eventsOf(sql, f.partner.id, 'lesson.ended'))[0], 'lesson.ended from the new process', 10_000);
    expect(ended.data.ended_at).toBe(emptySince.toISOString());
    await new Promise((r) => setTimeout(r, 1000)); // two sweeps (every 0.5-0.7 s): no second end
    expect(await eventsOf(sql, f.partner.id, 'lesson.ended')).toHaveLength(1);
    expect((await sessionsOf(sql, f.lesson.id))[0].ended_at).toEqual(emptySince);
    spare = n2;
  }, 40_000);

  it('bills no downtime when every gateway died with people in a lesson: the late reap dates their departure when their next lease renewal was due', async () => {
    const n1 = await aNode();
    const f = await lessonWithLinks(sql);
    await join(n1.wsUrl(await f.link('a')));
    await join(n1.wsUrl(await f.link('b')));
    const s = await firstSession(f.lesson.id);
    await billedAtLeast(f.lesson.id, 1);
    const killedAt = Date.now();
    await n1.kill();
    // past the lease (3 s after its last renewal): nobody is there to reap
    await eventually(async () => {
      const due = await deps.redis.zscore('gw:nodes', n1.nodeId);
      return due !== null && Date.now() > Number(due) + 200;
    }, "the dead node's lease expired", 10_000);
    const n2 = await spawnGateway(env);
    const ended = await eventually(async () => (await eventsOf(sql, f.partner.id, 'lesson.ended'))[0], 'lesson.ended', 15_000);
    const billed = (await lessonRow(sql, f.lesson.id)).billed_seconds;
    const lived = seconds(killedAt - s.started_at.getTime());
    expect(billed).toBeGreaterThanOrEqual(Math.floor(lived) - 1);
    expect(billed).toBeLessThanOrEqual(Math.ceil(lived) + 3); // at most the lease
    expect(new Date(ended.data.ended_at).getTime()).toBeLessThanOrEqual(killedAt + 3000);
    spare = n2;
  }, 40_000);

  it('ends an orphan session (its node died and Redis was flushed) dated at the last time presence was confirmed', async () => {
    const n1 = await aNode();
    const f = await lessonWithLinks(sql);
    await join(n1.wsUrl(await f.link('a')));
    await join(n1.wsUrl(await f.link('b')));
    const s = await firstSession(f.lesson.id);
    await billedAtLeast(f.lesson.id, 1); // flushes confirmed presence
    const killedAt = Date.now();
    await n1.kill();
    const r = admin();
    await r.flushall();
    r.disconnect();
    const n2 = await spawnGateway(env);
    const ended = await eventually(async () => (await eventsOf(sql, f.partner.id, 'lesson.ended'))[0], 'lesson.ended', 25_000);
    const billed = (await lessonRow(sql, f.lesson.id)).billed_seconds;
    const lived = seconds(killedAt - s.started_at.getTime());
    // presence was last confirmed by the flush before the kill (every 1 s): at most that is lost, nothing is added
    expect(billed).toBeGreaterThanOrEqual(Math.floor(lived) - 2);
    expect(billed).toBeLessThanOrEqual(Math.ceil(lived));
    expect(new Date(ended.data.ended_at).getTime()).toBeLessThanOrEqual(killedAt);
    await n2.stop();
  }, 45_000);
});
