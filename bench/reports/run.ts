/**
 * bench/reports: latency of GET /usage and GET /calls over a year for a partner
 * with 200,000 sessions (ten other partners hold as many), through the real API
 * (the API role in a process of its own) on loopback. Seeds a database of its own with SQL, prints median/p90/p99 per
 * scenario and the EXPLAIN ANALYZE plan of every report query, then drops the
 * database.
 *
 *   npm run bench:reports                       # full size, 40 samples per scenario
 *   npm run bench:reports -- --keep             # keep the seeded database for a rerun
 *   npm run bench:reports -- --reuse            # reuse a kept database (no seeding)
 *   BENCH_SESSIONS=20000 BENCH_SAMPLES=10 npm run bench:reports   # a quick smoke run
 */
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { createInterface } from 'node:readline';
import postgres from 'postgres';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { createSql } from '../../src/db/index.js';
import { migrate } from '../../src/db/migrate.js';
import type { Deps } from '../../src/deps.js';
import { createApiKey } from '../../src/domain/apiKeys.js';
import { recordMeteredTime } from '../../src/metering/charge.js';
import { endSession, ensureSessionStarted } from '../../src/metering/sessions.js';
import { getCallsReport } from '../../src/reports/calls.js';
import { moscowToday } from '../../src/reports/period.js';
import { getUsageReport } from '../../src/reports/usage.js';
import { commandLine } from '../lib/cli.js';
import { partnerId, seed } from './seed.js';

const { values: opts, env } = commandLine('npm run bench:reports: GET /usage and GET /calls over a year of 200,000 sessions, with the query plans', {
  keep: { type: 'boolean', help: 'keep the seeded database (lessons_bench_reports) for a rerun' },
  reuse: { type: 'boolean', help: 'reuse a kept database (no seeding)' },
  'no-charges': { type: 'boolean', help: 'skip the cost of a charge with and without the rollup triggers' },
}, {
  environment: {
    BENCH_SESSIONS: { default: '200000', help: 'sessions of the measured partner (and of each other one)' },
    BENCH_LESSONS: { default: '2000', help: 'lessons per partner' },
    BENCH_SAMPLES: { default: '40', help: 'requests timed per scenario' },
    BENCH_MAX_SECONDS: { default: '900', help: 'hard bound on the whole run' },
  },
});
const args = new Set(Object.entries(opts).filter(([, on]) => on).map(([name]) => `--${name}`));
const SESSIONS = Number(env.BENCH_SESSIONS);
const PARTNERS = 11;
const LESSONS = Number(env.BENCH_LESSONS);
const SAMPLES = Number(env.BENCH_SAMPLES);
const WARMUP = 3;
const DB_NAME = 'lessons_bench_reports';
const base = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/lessons';
const dbUrl = Object.assign(new URL(base), { pathname: `/${DB_NAME}` }).toString();
const adminUrl = Object.assign(new URL(base), { pathname: '/postgres' }).toString();
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const redisPrefix = `bench:reports:${process.pid}:`;
const stopAt = Date.now() + Number(env.BENCH_MAX_SECONDS) * 1000; // hard bound on the whole run

const bigint = { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) };
const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });

function checkTime() {
  if (Date.now() > stopAt) throw new Error('bench time bound reached');
}

async function prepareDatabase(): Promise<void> {
  const [exists] = await admin`SELECT 1 AS x FROM pg_database WHERE datname = ${DB_NAME}`;
  if (args.has('--reuse') && exists) {
    console.log(`reusing ${DB_NAME}`);
    return;
  }
  await admin.unsafe(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  await migrate(dbUrl);
  const sql = postgres(dbUrl, { max: 1, onnotice: () => {}, types: { bigint } });
  const t0 = Date.now();
  await seed(sql, { partners: PARTNERS, lessons: LESSONS, sessions: SESSIONS, now: new Date() });
  const t1 = Date.now();
  await sql`VACUUM (ANALYZE)`;
  const [counts] = await sql`SELECT (SELECT count(*) FROM sessions) AS sessions, (SELECT count(*) FROM usage_daily) AS usage_rows`;
  console.log(`seeded ${counts.sessions} sessions, ${counts.usage_rows} usage_daily rows for ${PARTNERS} partners in ${((t1 - t0) / 1000).toFixed(1)} s (+ vacuum ${((Date.now() - t1) / 1000).toFixed(1)} s)`);
  await sql.end();
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function measure(name: string, url: string, key: string): Promise<void> {
  // Time to the last byte of the body. The body is counted, not collected: a
  // client that buffers and copies 22 MB measures itself more than the server.
  const once = async () => {
    const t = performance.now();
    const res = await request(url, { headers: { authorization: `Bearer ${key}` } });
    let bytes = 0;
    let first: Buffer | undefined;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      first ??= chunk;
      bytes += chunk.length;
    }
    if (res.statusCode !== 200) throw new Error(`${name}: ${res.statusCode} ${first?.toString()}`);
    return { ms: performance.now() - t, bytes };
  };
  for (let i = 0; i < WARMUP; i++) await once();
  const ms: number[] = [];
  let bytes = 0;
  for (let i = 0; i < SAMPLES; i++) {
    checkTime();
    const r = await once();
    ms.push(r.ms);
    bytes = r.bytes;
  }
  ms.sort((a, b) => a - b);
  const f = (x: number) => x.toFixed(1).padStart(7);
  console.log(`${name.padEnd(34)} median ${f(percentile(ms, 50))} ms  p90 ${f(percentile(ms, 90))} ms  p99 ${f(percentile(ms, 99))} ms  max ${f(ms[ms.length - 1])} ms  body ${(bytes / 1024).toFixed(0)} KiB  (n=${SAMPLES})`);
}

/** Captures the exact SQL the report functions send, then EXPLAIN ANALYZEs it with the same parameters. */
async function explainReports(partner: string, period: { from: string; to: string }, deepOffset: number): Promise<void> {
  const captured: { query: string; params: unknown[] }[] = [];
  const capture = postgres(dbUrl, {
    max: 1,
    onnotice: () => {},
    types: { bigint },
    debug: (_c, query, params) => captured.push({ query, params }),
  }) as unknown as Deps['sql'];
  for await (const _day of (await getUsageReport(capture, partner, period, new Date())).days);
  await getCallsReport(capture, partner, period, { limit: 100, offset: deepOffset }, new Date());
  const reportQueries = captured.filter((q) => /FROM usage_lesson_daily|FROM sessions/.test(q.query));
  const titles = ['GET /usage, a year', `GET /calls page (limit 100, offset ${deepOffset})`, 'GET /calls totals, a year'];
  for (const [i, q] of reportQueries.entries()) {
    const plan = await capture.unsafe(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${q.query}`, q.params as never[]);
    console.log(`\n--- plan: ${titles[i] ?? 'query'}\n${plan.map((r) => r['QUERY PLAN']).join('\n')}`);
  }
  await capture.end();
}

/**
 * What the rollup triggers add to the charging path: the same charges and ends
 * through src/metering with the triggers on and off (alternating, to spread
 * the noise of a shared machine), timed one by one.
 */
async function chargeOverhead(sql: Deps['sql']): Promise<void> {
  const partner = partnerId(2);
  const lessons = 40;
  const ticks = 20;
  const stats: Record<'on' | 'off', { charge: number[]; end: number[] }> = { on: { charge: [], end: [] }, off: { charge: [], end: [] } };
  const toggle = async (on: boolean) => {
    const verb = on ? sql`ENABLE` : sql`DISABLE`;
    await sql`ALTER TABLE usage_daily ${verb} TRIGGER reports_usage_daily_changed`;
    await sql`ALTER TABLE sessions ${verb} TRIGGER reports_session_updated`;
  };
  let t0 = Date.now();
  for (const [round, state] of (['on', 'off', 'on', 'off', 'on', 'off'] as const).entries()) {
    checkTime();
    await toggle(state === 'on');
    const ids = Array.from({ length: lessons }, (_, i) => `lsn_bcharge_${process.pid}_${round}_${i}`);
    await sql`
      INSERT INTO lessons (id, partner_id, title, mode, subject_mode)
      SELECT id, ${partner}, 'charge bench', 'full', 'generic' FROM unnest(${ids}::text[]) id`;
    const start = t0;
    const sessions = [];
    for (const id of ids) sessions.push((await ensureSessionStarted(sql, { lessonId: id, at: new Date(start), people: 2 })).session.id);
    for (let k = 1; k <= ticks; k++) {
      for (const sessionId of sessions) {
        const t = performance.now();
        await recordMeteredTime(sql, { sessionId, cumulativeSeconds: k * 5, at: new Date(start + k * 5000) });
        stats[state].charge.push(performance.now() - t);
      }
    }
    for (const sessionId of sessions) {
      const t = performance.now();
      await endSession(sql, { sessionId, endedAt: new Date(start + ticks * 5000), at: new Date(start + ticks * 5000 + 300_000) });
      stats[state].end.push(performance.now() - t);
    }
    t0 += 3_600_000;
  }
  await toggle(true);
  await sql`SELECT reports_rebuild_usage(${partner}), reports_rebuild_calls(${partner}, '-infinity')`;
  const med = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);
  const line = (what: string, on: number[], off: number[]) =>
    console.log(`${what.padEnd(34)} with rollup triggers ${med(on).toFixed(2)} ms, without ${med(off).toFixed(2)} ms (median, n=${on.length}+${off.length}; ratio ${(med(on) / med(off)).toFixed(2)})`);
  console.log(`\ncharging path through src/metering, ${lessons} sessions x ${ticks} charges per round, rounds on/off x3`);
  line('recordMeteredTime (one charge)', stats.on.charge, stats.off.charge);
  line('endSession', stats.on.end, stats.off.end);
}

/**
 * The partner API in a process of its own (bench/reports/api-process.ts), so
 * the client reading 22 MB bodies does not share the server's event loop.
 * Resolves with its port once it listens.
 */
async function startApiProcess(): Promise<{ port: number; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/reports/api-process.ts'], {
    env: {
      ...process.env,
      DATABASE_URL: dbUrl,
      REDIS_URL: redisUrl,
      REDIS_KEY_PREFIX: redisPrefix,
      HOST: '127.0.0.1',
      API_PORT: '0',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_PER_MINUTE: '1000000',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Never leave the server behind, whatever ends this process.
  const orphanGuard = () => child.kill('SIGKILL');
  process.once('exit', orphanGuard);
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('API process did not start within 60 s')), 60_000);
    child.once('exit', (code) => reject(new Error(`API process exited (${code})`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const msg = JSON.parse(line) as { port?: number };
      if (msg.port) {
        clearTimeout(timer);
        resolve(msg.port);
      }
    });
  });
  return {
    port,
    stop: async () => {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
      process.removeListener('exit', orphanGuard);
    },
  };
}

async function main(): Promise<void> {
  await prepareDatabase();
  const sql = createSql(dbUrl, { max: 4 });
  const api = await startApiProcess();
  try {
    const partner = partnerId(1);
    const { apiKey } = await createApiKey(sql, partner);
    const today = await moscowToday(sql, new Date());
    const from = new Date(Date.parse(`${today}T00:00:00Z`) - 364 * 86_400_000).toISOString().slice(0, 10);
    const period = `from=${from}&to=${today}`;
    const [{ count }] = await sql<{ count: number }[]>`
      SELECT count(*) AS count FROM sessions WHERE partner_id = ${partner}
        AND started_at >= (${from}::date::timestamp AT TIME ZONE 'Europe/Moscow')`;
    const deepOffset = Math.max(0, count - 100);
    const root = `http://127.0.0.1:${api.port}/api/partner/v1`;
    console.log(`\npartner ${partner}: ${count} sessions in ${from}..${today} (Moscow days); ${SAMPLES} sequential requests per scenario after ${WARMUP} warm-ups; load average before: ${loadavg().map((x) => x.toFixed(1)).join(' ')}`);
    await measure('GET /usage (a year)', `${root}/usage?${period}`, apiKey);
    await measure('GET /calls (a year, first page)', `${root}/calls?${period}`, apiKey);
    await measure(`GET /calls (a year, offset ${deepOffset})`, `${root}/calls?${period}&offset=${deepOffset}`, apiKey);
    await measure('GET /calls (a year, limit 1000)', `${root}/calls?${period}&limit=1000`, apiKey);
    await measure('GET /usage (default 30 days)', `${root}/usage`, apiKey);
    await explainReports(partner, { from, to: today }, deepOffset);
    if (!args.has('--no-charges')) await chargeOverhead(sql);
  } finally {
    await api.stop();
    await sql.end();
    const redis = new Redis(redisUrl);
    const keys = await redis.keys(`${redisPrefix}*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
    if (!args.has('--keep')) await admin.unsafe(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
    await admin.end();
  }
}

await main();
