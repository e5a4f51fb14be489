import { fork, type ChildProcess } from 'node:child_process';
import { appendFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { Redis } from 'ioredis';
import { migrate } from '../../src/db/migrate.js';
import { createSql } from '../../src/db/index.js';
import { createApiKey } from '../../src/domain/apiKeys.js';
import { topUp } from '../../src/domain/ledger.js';
import { createPartner } from '../../src/domain/partners.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { Histogram } from './histogram.js';
import { cpuSeconds, logPort, spawnUntilPort } from '../lib/service.js';

/**
 * Load test of the realtime gateway against the `ws` baseline relay, in one
 * run on the same load (docs/benchmarks.md). Everything it needs is started
 * here, on 127.0.0.1: a fresh database (dropped at the end), an API process
 * (lessons and links are created through the real API), one gateway process,
 * the baseline relay, and worker processes that hold the connections.
 *
 *   npm run loadtest -- --connections 20000 --lessons 1000 --cursor-rate 5000
 *
 * Prints connections held, join latency (upgrade request to welcome) p50/p99,
 * cursor fan-out latency p50/p99, errors, server RSS and CPU seconds (total
 * and per 1,000 cursor messages, raw and net of the server's idle rate measured
 * over --idle seconds with every connection held and nobody sending: pings,
 * leases, the metering flush), and the largest billing error: every
 * lesson's billed_seconds against the time two or more of its participants
 * were really connected, as the workers measured it.
 *
 * Before the measured joins, --warmup connections (default 2 s worth at the
 * join rate) join lessons of their own the same way and leave: the figures are
 * those of a running server, not of its first second (JIT, connection pools,
 * Lua scripts); the cold first second is printed apart ("join latency, cold").
 */
const { values: a } = parseArgs({
  options: {
    connections: { type: 'string', default: '2000' },
    lessons: { type: 'string' },
    'join-rate': { type: 'string', default: '1000' },
    'cursor-rate': { type: 'string', default: '5000' },
    hold: { type: 'string', default: '20' },
    workers: { type: 'string', default: '4' },
    partners: { type: 'string', default: '10' },
    target: { type: 'string', default: 'both' }, // gateway | ws | uws | both (gateway + ws) | all
    'per-address': { type: 'string', default: '200' },
    'keep-db': { type: 'boolean', default: false },
    // seconds of holding every connection with no traffic, to measure the server's idle CPU rate
    idle: { type: 'string', default: '5' },
    warmup: { type: 'string' },
    // the lesson features (board, call, chat) of the participant UI: on (as deployed) or off (the gateway core)
    features: { type: 'string', default: 'on' },
  },
});
const N = Number(a.connections);
const M = Number(a.lessons ?? Math.max(1, Math.round(N / 20)));
const JOIN_RATE = Number(a['join-rate']);
const CURSOR_RATE = Number(a['cursor-rate']);
const HOLD = Number(a.hold);
const W = Number(a.workers);
const IDLE = Number(a.idle);
const WARMUP = Number(a.warmup ?? 2 * Number(a['join-rate']));
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BASE_DB = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/lessons';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const run = `${Date.now().toString(36)}${randomBase62(4).toLowerCase()}`;
const dbUrl = (() => {
  const u = new URL(BASE_DB);
  u.pathname = `/lessons_loadtest_${run}`;
  return u.toString();
})();
const PREFIX = `lt:${run}:`;
const children = new Set<ChildProcess>();
const log = (...x: unknown[]) => process.stderr.write(`[loadtest] ${x.join(' ')}\n`);

// ---- processes --------------------------------------------------------------

function spawnService(args: string[], env: Record<string, string>, ready: (line: string) => number | undefined): Promise<{ proc: ChildProcess; port: number }> {
  const nodeArgs = args[0] === 'bench/gateway/gatewayEntry.ts' ? (process.env.LOADTEST_GATEWAY_NODE_ARGS ?? '').split(' ').filter(Boolean) : [];
  const serverLog = process.env.LOADTEST_SERVER_LOG;
  return spawnUntilPort(args, env, ready, {
    cwd: ROOT,
    nodeArgs,
    onSpawn: (proc) => {
      children.add(proc);
      proc.on('exit', () => children.delete(proc));
    },
    onLine: serverLog ? (line) => appendFileSync(serverLog, `${line}\n`) : undefined,
  });
}

const serviceEnv = {
  DATABASE_URL: dbUrl,
  REDIS_URL,
  REDIS_KEY_PREFIX: PREFIX,
  HOST: '127.0.0.1',
  LOG_LEVEL: process.env.LOADTEST_LOG_LEVEL ?? 'info',
  EMBED_BASE_URL: 'http://127.0.0.1',
};

/** RSS (MB) and CPU seconds (user + system) of a process, from /proc. */
function usage(pid: number): { rssMb: number; cpu: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  return { rssMb: rss, cpu: cpuSeconds(pid) };
}

// ---- setup ------------------------------------------------------------------

interface LessonLinks {
  id: string;
  tokens: string[];
}

async function setup(): Promise<{ lessons: LessonLinks[]; warm: LessonLinks[] }> {
  const sql = createSql(dbUrl, { max: 4 });
  const keys: string[] = [];
  for (let i = 0; i < Number(a.partners); i++) {
    const p = await createPartner(sql, { name: `loadtest ${i}` });
    await topUp(sql, { partnerId: p.id, minutes: 10_000_000, at: new Date() });
    keys.push((await createApiKey(sql, p.id)).apiKey);
  }
  await sql.end();
  const api = await spawnService(['src/main.ts'], { ...serviceEnv, ROLES: 'api', API_PORT: '0', RATE_LIMIT_PER_MINUTE: '1000000000' }, logPort('partner API listening'));
  const base = `http://127.0.0.1:${api.port}/api/partner/v1`;
  const post = async (key: string, p: string, body: unknown) => {
    const res = await fetch(base + p, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (res.status !== 201) throw new Error(`POST ${p}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<any>;
  };
  const lessons: LessonLinks[] = [];
  const per = Math.floor(N / M);
  const extra = N % M;
  // the warm-up's own lessons, of the same size, after the measured ones
  const warmLessons = WARMUP > 0 ? Math.ceil(WARMUP / Math.max(2, per)) : 0;
  const t0 = Date.now();
  await pool(M + warmLessons, 16, async (i) => {
    const key = keys[i % keys.length];
    const lesson = await post(key, '/lessons', { title: `Load ${i}`, external_id: `lt-${i}` });
    const n = i >= M ? Math.max(2, per) : per + (i < extra ? 1 : 0);
    const tokens: string[] = [];
    for (let k = 0; k < n; k++) {
      const link = await post(key, `/lessons/${lesson.id}/links`, { user: { id: `u-${i}-${k}`, name: `P${k}`, role: k === 0 ? 'teacher' : 'student' }, ttl_minutes: 720 });
      tokens.push(link.token);
    }
    lessons[i] = { id: lesson.id, tokens };
  });
  log(`created ${M} lessons and ${N} links (and ${warmLessons} lessons for the warm-up) through the API in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  (globalThis as { apiBase?: string; apiKeys?: string[] }).apiBase = base;
  (globalThis as { apiKeys?: string[] }).apiKeys = keys;
  return { lessons: lessons.slice(0, M), warm: lessons.slice(M) };
}

async function pool(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) await fn(next++);
  }));
}

// ---- one scenario -------------------------------------------------------------

interface Result {
  target: string;
  held: number;
  joinP50: number;
  joinP99: number;
  /** the warm-up's joins: the server's first seconds */
  coldJoinP50: number;
  coldJoinP99: number;
  fanoutP50: number;
  fanoutP99: number;
  sent: number;
  delivered: number;
  expected: number;
  errors: Record<string, number>;
  rssMb: number;
  rssPeakMb: number;
  cpuSeconds: number;
  cpuCursorSeconds: number;
  cpuPer1000: number;
  /** CPU s per second while every connection is held and nobody sends (pings, leases, metering flush) */
  idleCpuPerSecond: number;
  /** cpuPer1000 without the idle rate over the cursor phase */
  cpuPer1000Net: number;
  billing?: { lessons: number; maxErrorSeconds: number; over1s: number; maxOutsideWindowSeconds: number };
}

/** The gateway runs before the links are created, as in production: it hears them issued (link_issued). */
function spawnGateway(): Promise<{ proc: ChildProcess; port: number }> {
  return spawnService(
    ['bench/gateway/gatewayEntry.ts'],
    { ...serviceEnv, GATEWAY_PORT: '0', LOADTEST_FEATURES: a.features === 'off' ? 'none' : 'default' },
    logPort('gateway listening'),
  );
}

/** `gateway`: the gateway main started before the links were created (the server of the gateway target). */
async function scenario(target: 'gateway' | 'ws' | 'uws', lessons: LessonLinks[], warm: LessonLinks[], gateway: { proc: ChildProcess; port: number } | undefined): Promise<Result> {
  if (target === 'gateway' && !gateway) throw new Error('the gateway target needs the gateway started before setup');
  const server =
    target === 'gateway'
      ? gateway!
      : await spawnService([target === 'ws' ? 'bench/gateway/wsRelay.ts' : 'bench/gateway/uwsRelay.ts'], {}, (line) => {
          try {
            return (JSON.parse(line) as { port?: number }).port;
          } catch {
            return undefined;
          }
        });
  const pid = server.proc.pid!;
  const url = (l: LessonLinks, t: string) =>
    target === 'gateway' ? `ws://127.0.0.1:${server.port}/ws?token=${t}` : `ws://127.0.0.1:${server.port}/ws?token=${t}&lesson=${l.id}`;
  const addresses = Array.from({ length: Math.ceil(N / Number(a['per-address'])) }, (_, i) => `127.0.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`);

  const startWorkers = (of: LessonLinks[]) =>
    Promise.all(
      Array.from({ length: W }, async (_, w) => {
        const proc = fork(path.join(ROOT, 'bench/gateway/worker.ts'), [], { execArgv: ['--import', 'tsx'], cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
        children.add(proc);
        proc.on('exit', () => children.delete(proc));
        const mine = of.filter((_, i) => i % W === w);
        proc.send({
          cmd: 'init',
          lessons: mine.map((l) => ({ id: l.id, urls: l.tokens.map((t) => url(l, t)) })),
          localAddresses: addresses.filter((_, i) => i % W === w),
          joinRate: JOIN_RATE / W,
          cursorRate: CURSOR_RATE / W,
          holdSeconds: HOLD,
        });
        await next(proc, 'ready');
        return proc;
      }),
    );
  const phase = async (workers: ChildProcess[], cmd: string, ev: string) => {
    let peak = 0;
    const timer = setInterval(() => (peak = Math.max(peak, usage(pid).rssMb)), 250);
    const before = usage(pid).cpu;
    const t = performance.now();
    const replies = await Promise.all(workers.map((w) => (w.send({ cmd }), next(w, ev))));
    clearInterval(timer);
    return { replies, cpu: usage(pid).cpu - before, seconds: (performance.now() - t) / 1000, peak: Math.max(peak, usage(pid).rssMb) };
  };

  // warm-up: the same joins on lessons of their own, then they leave
  const cold = new Histogram();
  if (warm.length > 0) {
    log(`${target}: warm-up, joining ${warm.reduce((s, l) => s + l.tokens.length, 0)} connections at ${JOIN_RATE}/s`);
    const warmers = await startWorkers(warm);
    for (const r of (await phase(warmers, 'join', 'joined')).replies) cold.merge(new Histogram(r.join));
    await phase(warmers, 'close', 'closed');
    for (const w of warmers) w.send({ cmd: 'exit' });
    await new Promise((r) => setTimeout(r, 2000));
  }
  const workers = await startWorkers(lessons);
  const cpu0 = usage(pid).cpu;

  log(`${target}: joining ${N} connections at ${JOIN_RATE}/s`);
  const joined = await phase(workers, 'join', 'joined');
  const held = joined.replies.reduce((s, r) => s + r.held, 0);
  const rssHeld = usage(pid).rssMb;
  await new Promise((r) => setTimeout(r, 2000));
  // the server's cost of holding the connections with nobody sending (pings, leases, metering flush)
  const idle0 = usage(pid).cpu;
  const idleT = performance.now();
  await new Promise((r) => setTimeout(r, IDLE * 1000));
  const idleCpuPerSecond = IDLE > 0 ? (usage(pid).cpu - idle0) / ((performance.now() - idleT) / 1000) : 0;
  log(`${target}: holding ${held}; cursors at ${CURSOR_RATE}/s for ${HOLD} s`);
  const cursored = await phase(workers, 'cursor', 'cursored');
  log(`${target}: closing`);
  const closed = await phase(workers, 'close', 'closed');
  const cpuTotal = usage(pid).cpu - cpu0;
  const rssPeak = Math.max(joined.peak, cursored.peak, closed.peak);

  const join = new Histogram();
  for (const r of joined.replies) join.merge(new Histogram(r.join));
  const fan = new Histogram();
  for (const r of cursored.replies) fan.merge(new Histogram(r.fanout));
  const errors: Record<string, number> = {};
  for (const r of closed.replies) for (const [k, v] of Object.entries(r.errors as Record<string, number>)) errors[k] = (errors[k] ?? 0) + v;
  const sent = cursored.replies.reduce((s, r) => s + r.sent, 0);
  const result: Result = {
    target,
    held,
    joinP50: join.percentile(50),
    joinP99: join.percentile(99),
    coldJoinP50: cold.percentile(50),
    coldJoinP99: cold.percentile(99),
    fanoutP50: fan.percentile(50),
    fanoutP99: fan.percentile(99),
    sent,
    delivered: cursored.replies.reduce((s, r) => s + r.received, 0),
    expected: cursored.replies.reduce((s, r) => s + r.expected, 0),
    errors,
    rssMb: rssHeld,
    rssPeakMb: rssPeak,
    cpuSeconds: cpuTotal,
    cpuCursorSeconds: cursored.cpu,
    cpuPer1000: (cursored.cpu / sent) * 1000,
    idleCpuPerSecond,
    cpuPer1000Net: (Math.max(0, cursored.cpu - idleCpuPerSecond * cursored.seconds) / sent) * 1000,
  };
  if (target === 'gateway') {
    const together: Record<string, number> = Object.assign({}, ...closed.replies.map((r) => r.together));
    (globalThis as { spans?: unknown }).spans = Object.assign({}, ...closed.replies.map((r) => r.spans));
    await new Promise((r) => setTimeout(r, 3000)); // the pause charges are written at once; leave time for the queue
    const fromRequest: Record<string, number> = Object.assign({}, ...closed.replies.map((r) => r.togetherFromRequest));
    result.billing = await checkBilling(lessons, together, fromRequest);
  }
  for (const w of workers) w.send({ cmd: 'exit' });
  server.proc.kill('SIGTERM');
  await new Promise((r) => server.proc.once('exit', r));
  return result;
}

async function checkBilling(lessons: LessonLinks[], together: Record<string, number>, fromRequest: Record<string, number>) {
  const g = globalThis as unknown as { apiBase: string; apiKeys: string[] };
  let max = 0;
  let over = 0;
  let maxOutside = 0;
  await pool(lessons.length, 16, async (i) => {
    const l = lessons[i];
    const res = await fetch(`${g.apiBase}/lessons/${l.id}`, { headers: { authorization: `Bearer ${g.apiKeys[i % g.apiKeys.length]}` } });
    const body = (await res.json()) as { billed_seconds: number };
    const lo = together[l.id] ?? 0;
    const hi = Math.max(lo, fromRequest[l.id] ?? lo);
    const err = Math.abs(body.billed_seconds - lo);
    // distance from the window the truth lies in (welcome-based .. request-based), minus the floor's second
    const outside = Math.max(0, lo - body.billed_seconds - 1, body.billed_seconds - hi);
    max = Math.max(max, err);
    maxOutside = Math.max(maxOutside, outside);
    if (err > 1) over++;
    if (err > 1 && process.env.LOADTEST_DEBUG) {
      const span = (globalThis as unknown as { spans: Record<string, [number, number]> }).spans[l.id];
      log(`billing error ${err.toFixed(3)} s in ${l.id}: billed ${body.billed_seconds}, together ${lo} (${hi} from the upgrade requests), client span ${new Date(span[0]).toISOString()} .. ${new Date(span[1]).toISOString()}`);
    }
  });
  return { lessons: lessons.length, maxErrorSeconds: Number(max.toFixed(3)), over1s: over, maxOutsideWindowSeconds: Number(maxOutside.toFixed(3)) };
}

function next(proc: ChildProcess, ev: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const on = (m: { ev: string }) => {
      if (m.ev === ev) {
        proc.off('message', on);
        resolve(m);
      }
    };
    proc.on('message', on);
    proc.once('exit', (code) => reject(new Error(`worker exited ${code} waiting for ${ev}`)));
  });
}

// ---- main -------------------------------------------------------------------

async function cleanup(): Promise<void> {
  for (const c of children) c.kill('SIGKILL');
  const r = new Redis(REDIS_URL);
  let cursor = '0';
  do {
    const [nextCursor, keys] = await r.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 1000);
    cursor = nextCursor;
    if (keys.length) await r.del(...keys);
  } while (cursor !== '0');
  r.disconnect();
  if (!a['keep-db']) {
    const admin = new URL(BASE_DB);
    admin.pathname = '/postgres';
    const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
    await sql.unsafe(`DROP DATABASE IF EXISTS "lessons_loadtest_${run}" WITH (FORCE)`);
    await sql.end();
  }
}

const fmt = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');

try {
  log(`${N} connections over ${M} lessons, ${W} workers, join ${JOIN_RATE}/s, cursors ${CURSOR_RATE}/s for ${HOLD} s, lesson features ${a.features}; 2 cores shared by everything`);
  const targets = { gateway: ['gateway'], ws: ['ws'], uws: ['uws'], both: ['gateway', 'ws'], all: ['gateway', 'ws', 'uws'] }[a.target!] as ('gateway' | 'ws' | 'uws')[];
  if (!targets) throw new Error(`--target must be gateway, ws, uws, both or all`);
  await migrate(dbUrl);
  const gateway = targets.includes('gateway') ? await spawnGateway() : undefined;
  const { lessons, warm } = await setup();
  const results: Result[] = [];
  for (const t of targets) results.push(await scenario(t, lessons, warm, gateway));
  const rows: [string, (r: Result) => string][] = [
    ['connections held', (r) => `${r.held} / ${N}`],
    ['join latency p50 / p99 (ms)', (r) => `${fmt(r.joinP50)} / ${fmt(r.joinP99)}`],
    ['join latency, cold: the warm-up joins, p50 / p99 (ms)', (r) => `${fmt(r.coldJoinP50)} / ${fmt(r.coldJoinP99)}`],
    ['cursor fan-out p50 / p99 (ms)', (r) => `${fmt(r.fanoutP50)} / ${fmt(r.fanoutP99)}`],
    ['cursor messages sent / deliveries', (r) => `${r.sent} / ${r.delivered} of ${r.expected}`],
    ['errors', (r) => JSON.stringify(r.errors)],
    ['server RSS holding / peak (MB)', (r) => `${fmt(r.rssMb, 0)} / ${fmt(r.rssPeakMb, 0)}`],
    ['server CPU s (whole run / cursor phase)', (r) => `${fmt(r.cpuSeconds)} / ${fmt(r.cpuCursorSeconds)}`],
    ['server CPU s per 1,000 cursor messages', (r) => fmt(r.cpuPer1000, 4)],
    ['server CPU s per second idle (all held, nobody sending)', (r) => fmt(r.idleCpuPerSecond, 4)],
    ['server CPU s per 1,000 cursor messages, net of idle', (r) => fmt(r.cpuPer1000Net, 4)],
    ['billing: largest error (s), lessons > 1 s', (r) => (r.billing ? `${r.billing.maxErrorSeconds} , ${r.billing.over1s} of ${r.billing.lessons}` : '-')],
    ['billing: largest error outside the join-latency window (s)', (r) => (r.billing ? `${r.billing.maxOutsideWindowSeconds}` : '-')],
  ];
  const out = [`| figure | ${results.map((r) => r.target).join(' | ')} |`, `|---|${results.map(() => '---').join('|')}|`];
  for (const [name, f] of rows) out.push(`| ${name} | ${results.map(f).join(' | ')} |`);
  const g = results.find((r) => r.target === 'gateway');
  const b = results.find((r) => r.target === 'ws');
  if (g && b) out.push(`\ngateway CPU per message / ws baseline: ${fmt(g.cpuPer1000 / b.cpuPer1000, 3)} (net of idle: ${fmt(g.cpuPer1000Net / b.cpuPer1000Net, 3)})`);
  const u = results.find((r) => r.target === 'uws');
  if (u && b) out.push(`uws CPU per message / ws baseline: ${fmt(u.cpuPer1000 / b.cpuPer1000, 3)} (net of idle: ${fmt(u.cpuPer1000Net / b.cpuPer1000Net, 3)})`);
  process.stdout.write(`${out.join('\n')}\n\n${JSON.stringify({ params: { N, M, JOIN_RATE, CURSOR_RATE, HOLD, W, features: a.features }, results })}\n`);
} finally {
  await cleanup();
}
