import postgres from 'postgres';
import { recordEvents } from '../../src/events/outbox.js';
import { Cluster, freePort, PostgresServer, type Exit, type Role } from './cluster.js';
import { World, type Lesson } from './world.js';

/**
 * The fault scenarios (docs/reliability.md). Each starts its own cluster (database,
 * redis-server, API, two gateways, dispatcher), does its fault, lets everyone
 * leave, and returns what an operator would check: truth against billed seconds,
 * events recorded against delivered, and process exits.
 */
export interface Result {
  scenario: string;
  params: string;
  lessons: number;
  /** seconds both participants were really in, summed over the lessons (from the welcomes) */
  truth: number;
  /** the same from the upgrade requests: the truth lies between the two (joins are slow while a fault hits) */
  truthFromRequests: number;
  billed: number;
  /** largest billed - truthFromRequests of one lesson (positive: over-billed) and smallest billed - truth (negative: under-billed) */
  maxOver: number;
  maxUnder: number;
  events: { expected: number; delivered: number; missing: number; duplicates: number; maxPerEvent: number };
  exits: Exit[];
  notes: string[];
  /** billed - truth of each lesson, in the order the lessons were made */
  perLesson: number[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Default settings except a 1 s metering flush, so billed seconds can be read soon after everyone left. */
const BASE_ENV = { GATEWAY_METER_FLUSH_SECONDS: '1' };

async function withCluster(
  scenario: string,
  params: string,
  fn: (c: Cluster, w: World, admin: postgres.Sql, notes: string[]) => Promise<Lesson[]>,
  opts: { env?: Record<string, string>; roles?: Role[]; deliverMs?: number; baseDb?: string } = {},
): Promise<Result> {
  const cluster = new Cluster({ ...BASE_ENV, ...opts.env }, opts.baseDb);
  const world = new World(cluster);
  const admin = postgres(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', { max: 1, onnotice: () => {}, connection: { application_name: 'chaos-killer' } });
  const notes: string[] = [];
  try {
    await cluster.prepare();
    await cluster.start(opts.roles);
    await world.setup();
    const measured = await fn(cluster, world, admin, notes);
    for (const l of measured) for (const p of l.people) if (p.connected) p.leave();
    // two metering flushes after the last leave; a scenario without lessons has nothing to bill
    if (measured.length > 0) await sleep(3_000);
    let truth = 0;
    let truthHi = 0;
    let billed = 0;
    let maxOver = -Infinity;
    let maxUnder = Infinity;
    const perLesson: number[] = [];
    for (const l of measured) {
      const t = world.truth(l);
      const hi = world.truth(l, true);
      // NaN when the API is gone (a scenario that ended it): reported, not thrown
      const b = await world.billed(l).catch(() => NaN);
      // distance outside the window [truth, truthFromRequests]: 0 inside it
      perLesson.push(Math.round((b > hi ? b - hi : b < t ? b - t : 0) * 100) / 100);
      truth += t;
      truthHi += hi;
      billed += b;
      maxOver = Math.max(maxOver, b - hi);
      maxUnder = Math.min(maxUnder, b - t);
    }
    // a window for lost events, not a speed target: it ends as soon as all have arrived, and is long
    // enough for a dispatcher on a machine loaded by other test runs (15 s once missed 2 events there)
    notes.push(await world.waitDelivered(opts.deliverMs ?? 30_000));
    const events = await world.events();
    if (events.missing > 0) {
      notes.push(...(await world.undelivered()));
      for (const [role, p] of cluster.procs) notes.push(...p.lines.slice(-6).map((l) => `${role}: ${l.trim().slice(0, 400)}`));
    }
    const r2 = (x: number) => Math.round(x * 100) / 100;
    return {
      scenario,
      params,
      lessons: measured.length,
      truth: r2(truth),
      truthFromRequests: r2(truthHi),
      billed,
      maxOver: measured.length ? r2(maxOver) : 0,
      maxUnder: measured.length ? r2(maxUnder) : 0,
      events,
      exits: cluster.exits.slice(),
      notes,
      perLesson,
    };
  } finally {
    await world.close().catch(() => {});
    await cluster.stop(!!process.env.CHAOS_KEEP_DB).catch(() => {});
    await admin.end({ timeout: 1 });
  }
}

async function joinAll(lessons: Lesson[], opts: { viaProxy?: boolean } = {}): Promise<void> {
  await Promise.all(lessons.flatMap((l) => l.people.map((p) => p.join(opts))));
}

/** Postgres backends of every service process killed every `everyMs` for `forMs`, while people join and stay. */
export function pgKills(everyMs = 2_000, forMs = 30_000, lessons = 6): Promise<Result> {
  return withCluster('postgres backends killed', `every ${everyMs / 1000} s for ${forMs / 1000} s, ${lessons} lessons`, async (c, w, admin, notes) => {
    const first = await w.lessonsOnGateways(lessons / 2);
    const later = await w.lessonsOnGateways(lessons / 2);
    await joinAll(first);
    let kills = 0;
    let rounds = 0;
    const end = Date.now() + forMs;
    const killer = (async () => {
      while (Date.now() < end) {
        kills += await c.killBackends(admin);
        rounds++;
        await sleep(everyMs);
      }
    })();
    // partner API reads during the kills: how many fail
    const statuses = new Map<number, number>();
    const reader = (async () => {
      const l = first[0];
      while (Date.now() < end) {
        const st = await fetch(`${w.apiBase}/lessons/${l.id}`, { headers: { authorization: `Bearer ${l.key}` } }).then(
          async (r) => (await r.arrayBuffer(), r.status),
          () => 0,
        );
        statuses.set(st, (statuses.get(st) ?? 0) + 1);
        await sleep(100);
      }
    })();
    // the second half joins while the kills go on (lesson.started, participant.joined events then)
    await sleep(Math.min(forMs / 3, 5_000));
    let failedJoins = 0;
    let gaveUp = 0;
    for (const l of later) {
      for (const p of l.people) {
        for (let i = 0; ; i++) {
          try {
            await p.join();
            break;
          } catch {
            failedJoins++;
            // a gateway that died refuses forever: counted, the lesson's truth is then 0
            if (i >= 10) {
              gaveUp++;
              break;
            }
            await sleep(500);
          }
        }
      }
    }
    await killer;
    await reader;
    await sleep(2_000);
    notes.push(`${kills} backends terminated in ${rounds} rounds; ${failedJoins} joins refused during the kills (retried)${gaveUp ? `, ${gaveUp} participants never got in` : ''}`);
    notes.push(`API reads during the kills, by status: ${[...statuses].map(([k, v]) => `${k || 'no answer'}: ${v}`).join(', ')}`);
    return [...first, ...later];
  });
}

/** The dispatcher's lock connection killed every `everyMs` while a burst of `n` events is delivered. */
export function lockKill(n = 200, everyMs = 300): Promise<Result> {
  return withCluster('dispatcher lock connection killed during a burst', `${n} events, lock killed every ${everyMs} ms`, async (c, w, admin, notes) => {
    const [l] = await w.lessonsOnGateways(1);
    w.receiver.delayMs = 50;
    const partnerId = (await w.sql<{ partner_id: string }[]>`SELECT partner_id FROM lessons WHERE id = ${l.id}`)[0].partner_id;
    let kills = 0;
    let killing = true;
    const killer = (async () => {
      while (killing) {
        kills += await c.killBackends(admin, 'lock');
        await sleep(everyMs);
      }
    })();
    for (let i = 0; i < n; i += 10) {
      const batch = Array.from({ length: Math.min(10, n - i) }, (_, k) => ({ partnerId, type: 'lesson.started' as const, data: { lesson_id: `burst_${i + k}` }, at: new Date() }));
      await w.sql.begin((tx) => recordEvents(tx, batch));
      await sleep(200);
    }
    await w.waitDelivered(10_000);
    killing = false;
    await killer;
    notes.push(`lock connection terminated ${kills} times`);
    return [];
  });
}

/** Four service processes (API, two gateways, dispatcher) started at once on a database that does not exist yet. */
export async function concurrentStart(): Promise<Result> {
  const cluster = new Cluster(BASE_ENV);
  const notes: string[] = [];
  const { RedisServer, freePort } = await import('./cluster.js');
  cluster.redis = new RedisServer(await freePort());
  await cluster.redis.start();
  try {
    const started = await Promise.allSettled((['api', 'gw1', 'gw2', 'dispatcher'] as Role[]).map((r) => cluster.startRole(r)));
    const failed = started.filter((s) => s.status === 'rejected').length;
    notes.push(`${4 - failed} of 4 processes became ready`);
    await sleep(1_000);
    return {
      scenario: 'four processes started at once on a new database',
      params: 'api, gw1, gw2, dispatcher',
      lessons: 0,
      truth: 0,
      truthFromRequests: 0,
      billed: 0,
      maxOver: 0,
      maxUnder: 0,
      events: { expected: 0, delivered: 0, missing: 0, duplicates: 0, maxPerEvent: 0 },
      exits: cluster.exits.slice(),
      notes,
      perLesson: [],
    };
  } finally {
    await cluster.stop(!!process.env.CHAOS_KEEP_DB).catch(() => {});
  }
}

/** kill -9 of a gateway while each lesson has one person on it and one on the other gateway. */
export function gatewayKill(lessons = 4, holdMs = 5_000, afterMs = 25_000): Promise<Result> {
  return withCluster('kill -9 of a gateway', `${lessons} lessons across both gateways, the others stay ${afterMs / 1000} s`, async (c, w, _admin, notes) => {
    const ls = await w.lessonsOnGateways(lessons);
    await joinAll(ls);
    await sleep(holdMs);
    await c.kill9('gw1');
    await sleep(afterMs); // the person on gw2 stays alone: nothing is metered after the kill in truth
    notes.push('participants on gw1 lost their socket at the kill; truth ends there');
    return ls;
  });
}

/** A participant whose connection goes silent both ways (half-open) while the other stays. */
export function halfOpen(lessons = 4, holdMs = 5_000, afterMs = 30_000): Promise<Result> {
  return withCluster('half-open client', `${lessons} lessons, one side silent, the other stays ${afterMs / 1000} s`, async (_c, w) => {
    const ls = await w.lessonsOnGateways(lessons);
    await Promise.all(ls.map(async (l) => {
      await l.people[0].join();
      await l.people[1].join({ viaProxy: true });
    }));
    await sleep(holdMs);
    for (const l of ls) l.people[1].goSilent();
    await sleep(afterMs);
    return ls;
  });
}

/** The redis-server killed (its data gone) and started again `downMs` later, while everyone stays. */
export function redisDown(downMs: number, lessons = 4, holdMs = 5_000, afterMs = 10_000): Promise<Result> {
  return withCluster(`Redis down ${downMs / 1000} s`, `${lessons} lessons, everyone stays throughout`, async (c, w, _admin, notes) => {
    const ls = await w.lessonsOnGateways(lessons);
    await joinAll(ls);
    await sleep(holdMs);
    await c.redis.kill();
    await sleep(downMs);
    await c.redis.start();
    await sleep(afterMs);
    const dropped = ls.flatMap((l) => l.people).filter((p) => !p.connected).length;
    notes.push(`${dropped} participant sockets closed by the gateways during the outage`);
    return ls;
  });
}

/**
 * The whole Postgres server stopped at once, as in a crash (`pg_ctl stop -m immediate`: no shutdown
 * checkpoint, recovery at the next start), and started again `downMs` later, on a server of the
 * scenario's own, while people are in lessons; then lessons are made and joined on the restarted
 * server (their links announced on the LISTEN connections that had to come back). `server`: one
 * already running (initdb takes seconds, which a caller may spend beside other work), left to the
 * caller to destroy; by default the scenario makes its own.
 */
export async function pgRestart(downMs = 5_000, lessons = 4, holdMs = 3_000, afterMs = 5_000, server?: PostgresServer): Promise<Result> {
  const pg = server ?? new PostgresServer(await freePort());
  if (!server) await pg.init();
  try {
    return await withCluster(
      'Postgres restarted',
      `stopped as in a crash, started again ${downMs / 1000} s later, ${lessons} lessons in, ${lessons} made after`,
      async (c, w, _admin, notes) => {
        const before = await w.lessonsOnGateways(lessons);
        await joinAll(before);
        await sleep(holdMs);
        const stoppedAt = Date.now();
        await pg.stop('immediate');
        // partner API reads while it is down and until it answers again
        const statuses = new Map<number, number>();
        const l = before[0];
        const read = () =>
          fetch(`${w.apiBase}/lessons/${l.id}`, { headers: { authorization: `Bearer ${l.key}` } }).then(
            async (r) => (await r.arrayBuffer(), r.status),
            () => 0,
          );
        // started again in the background while the reads go on; a failed start ends the scenario
        let upAt = 0;
        let startFailed: unknown;
        const restarted = sleep(downMs)
          .then(() => pg.start())
          .then(
            () => void (upAt = Date.now()),
            (err) => void (startFailed = err),
          );
        let back = 0;
        for (;;) {
          const st = await read();
          statuses.set(st, (statuses.get(st) ?? 0) + 1);
          if (startFailed) throw startFailed;
          if (upAt !== 0 && st === 200) {
            back = Date.now();
            break;
          }
          if (Date.now() - stoppedAt > downMs + 60_000) throw new Error('the API did not answer 200 within 60 s of the restart');
          await sleep(100);
        }
        await restarted;
        notes.push(`Postgres down ${((upAt - stoppedAt) / 1000).toFixed(1)} s; the API's first 200 ${((back - upAt) / 1000).toFixed(1)} s after the start`);
        notes.push(`API reads of a lesson while down and until the first 200, by status: ${[...statuses].map(([k, v]) => `${k}: ${v}`).join(', ')}`);
        const after = await w.lessonsOnGateways(lessons);
        await joinAll(after);
        await sleep(afterMs);
        const dropped = before.flatMap((x) => x.people).filter((p) => !p.connected).length;
        notes.push(`${dropped} participant sockets of the lessons in progress closed during the outage`);
        return [...before, ...after];
      },
      { baseDb: pg.url },
    );
  } finally {
    if (!server) await pg.destroy();
  }
}

export const SCENARIOS: Record<string, { short: boolean; run: (short: boolean) => Promise<Result> }> = {
  'pg-kills': { short: true, run: (short) => (short ? pgKills(1_000, 8_000, 4) : pgKills()) },
  'lock-kill': { short: true, run: (short) => (short ? lockKill(100, 300) : lockKill()) },
  'concurrent-start': { short: true, run: () => concurrentStart() },
  'gateway-kill9': { short: false, run: () => gatewayKill() },
  'half-open': { short: false, run: () => halfOpen() },
  'redis-40': { short: false, run: () => redisDown(40_000) },
  'redis-120': { short: false, run: () => redisDown(120_000) },
  'pg-restart': { short: true, run: (short) => (short ? pgRestart(3_000, 2) : pgRestart()) },
};
