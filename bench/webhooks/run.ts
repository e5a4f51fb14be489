/**
 * bench/webhooks: one dispatcher process delivering to a local HTTPS receiver.
 *
 *   npm run bench:webhooks [-- --runs 3 --backlog 20000 --rate 200 --seconds 15 --partners 8]
 *
 * Each run, in a database of its own:
 *  1. throughput: `backlog` events are recorded (recordEvent, 500 per transaction)
 *     while no dispatcher runs; then one dispatcher process starts and drains them.
 *     Sustained deliveries/s = deliveries / (last receipt - first receipt).
 *  2. delay: events are recorded one per transaction at `rate`/s for `seconds`;
 *     delay = receipt at the receiver - commit of the event's transaction
 *     (both clocks in this process). The first second is warm-up.
 * Prints each run and the medians, and the ratios to the targets
 * (>= 1,000 deliveries/s; p99 < 250 ms at 200 events/s).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { commandLine } from '../lib/cli.js';
import postgres from 'postgres';
import { loadConfig } from '../../src/config.js';
import { createSql, type Sql } from '../../src/db/index.js';
import { migrate } from '../../src/db/migrate.js';
import { createPartner } from '../../src/domain/partners.js';
import { recordEvent } from '../../src/events/outbox.js';
import { systemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { setWebhook } from '../../src/webhooks/endpoint.js';
import type { Deps } from '../../src/deps.js';
import { leafCert, testCa } from '../../test/webhooks/helpers/tls.js';
import { cpuSeconds } from '../lib/service.js';

const { values } = commandLine('npm run bench:webhooks: one dispatcher process, a local HTTPS receiver; deliveries/s draining a backlog, commit-to-receipt delay', {
  runs: { type: 'string', default: '3', help: 'runs (medians are printed)' },
  backlog: { type: 'string', default: '20000', help: 'events recorded before the dispatcher starts (throughput)' },
  rate: { type: 'string', default: '200', help: 'events per second recorded one per transaction (delay)' },
  seconds: { type: 'string', default: '15', help: 'seconds of the delay part' },
  partners: { type: 'string', default: '8', help: 'partners the events are spread over' },
});
const RUNS = Number(values.runs);
const BACKLOG = Number(values.backlog);
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const PARTNERS = Number(values.partners);

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};
const median = (xs: number[]) => pct(xs, 50);

// The receiver: answers 200 at once, notes when each delivery id arrived.
const received = new Map<number, number>();
let duplicates = 0;
const receiver = createServer(leafCert(['127.0.0.1']), (req, res) => {
  const at = now();
  const id = Number(req.headers['x-whiteboard-delivery']);
  if (received.has(id)) duplicates++;
  else received.set(id, at);
  req.resume();
  req.on('end', () => res.writeHead(200).end());
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const receiverUrl = `https://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
const caFile = path.join(mkdtempSync(path.join(tmpdir(), 'bench-wh-')), 'ca.pem');
writeFileSync(caFile, testCa());

interface RunResult {
  deliveriesPerSecond: number;
  drainSeconds: number;
  p50: number;
  p99: number;
  steadyEvents: number;
  dispatcherCpuPercent: number;
}

async function oneRun(run: number): Promise<RunResult> {
  const base = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/lessons');
  base.pathname = `/lessons_bench_webhooks_${process.pid}_${run}`;
  const databaseUrl = base.toString();
  await migrate(databaseUrl);
  const env = {
    DATABASE_URL: databaseUrl,
    WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
    WEBHOOK_SECRET_KEYS: 'MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=',
    LOG_LEVEL: 'warn',
    REDIS_KEY_PREFIX: `bench:webhooks:${process.pid}:`,
  };
  const config = loadConfig({ ...process.env, ...env });
  const sql = createSql(databaseUrl, { max: 10 });
  const deps = { config, sql, clock: systemClock, log: createLogger('warn') } as unknown as Deps;
  const partners: string[] = [];
  for (let i = 0; i < PARTNERS; i++) {
    const p = await createPartner(sql, { name: `bench ${i}` });
    await setWebhook(deps, p.id, receiverUrl);
    partners.push(p.id);
  }
  received.clear();
  duplicates = 0;

  // 1. backlog, then one dispatcher drains it
  const backlogIds: number[] = [];
  for (let i = 0; i < BACKLOG; i += 500) {
    await sql.begin(async (tx) => {
      for (let j = i; j < Math.min(BACKLOG, i + 500); j++) {
        backlogIds.push((await recordEvent(tx, partners[j % PARTNERS], 'lesson.started', { lesson_id: `lsn_${j}`, external_id: null, started_at: new Date().toISOString(), ended_at: null, minutes: 0 }, new Date())).id);
      }
    });
  }
  const child = await startDispatcherProcess({ ...env, BENCH_CA_FILE: caFile });
  const cpu0 = cpuSeconds(child.pid!);
  const t0 = now();
  while (received.size < BACKLOG && now() - t0 < 120_000) await sleep(20);
  const times = backlogIds.map((id) => received.get(id)).filter((x): x is number => x !== undefined);
  const drainSeconds = (Math.max(...times) - Math.min(...times)) / 1000;
  const deliveriesPerSecond = times.length / drainSeconds;
  const cpuDrain = cpuSeconds(child.pid!) - cpu0;

  // 2. steady rate, one event per transaction
  received.clear();
  const commits = new Map<number, number>();
  const interval = 1000 / RATE;
  const start = now();
  const total = Math.floor(RATE * SECONDS);
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + i * interval;
    const wait = due - now();
    if (wait > 0) await sleep(wait);
    inflight.push(
      (async () => {
        const e = await sql.begin((tx) => recordEvent(tx, partners[i % PARTNERS], 'participant.joined', { lesson_id: `lsn_${i}`, external_id: null, role: 'student', name: 'Bench' }, new Date()));
        commits.set(e.id, now());
      })(),
    );
  }
  await Promise.all(inflight);
  const t1 = now();
  while (received.size < total && now() - t1 < 30_000) await sleep(20);
  const delays: number[] = [];
  for (const [id, committed] of commits) {
    const at = received.get(id);
    if (at !== undefined && committed - start > 1000) delays.push(at - committed);
  }
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  await sql.end({ timeout: 5 });
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const a = postgres(admin.toString(), { max: 1, onnotice: () => {} });
  await a.unsafe(`DROP DATABASE IF EXISTS "${base.pathname.slice(1)}" WITH (FORCE)`);
  await a.end();
  if (duplicates > 0) console.log(`  ! ${duplicates} duplicate deliveries`);
  if (times.length < BACKLOG || delays.length === 0) console.log(`  ! missing deliveries: backlog ${times.length}/${BACKLOG}, steady ${received.size}/${total}`);
  return {
    deliveriesPerSecond,
    drainSeconds,
    p50: pct(delays, 50),
    p99: pct(delays, 99),
    steadyEvents: delays.length,
    dispatcherCpuPercent: (cpuDrain / drainSeconds) * 100,
  };
}

function startDispatcherProcess(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'dispatcher.ts')], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'inherit'], // its stdin closing (we exited) stops it
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('dispatcher not ready')), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      if (String(d).startsWith('ready')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once('exit', (code) => reject(new Error(`dispatcher exited with ${code}`)));
  });
}

console.log(`bench/webhooks: ${RUNS} runs; backlog ${BACKLOG} events over ${PARTNERS} partners; steady ${RATE} events/s for ${SECONDS} s`);
const results: RunResult[] = [];
for (let r = 1; r <= RUNS; r++) {
  const x = await oneRun(r);
  results.push(x);
  console.log(
    `run ${r}: ${x.deliveriesPerSecond.toFixed(0)} deliveries/s (backlog drained in ${x.drainSeconds.toFixed(2)} s, dispatcher CPU ${x.dispatcherCpuPercent.toFixed(0)}%); ` +
      `at ${RATE}/s: p50 ${x.p50.toFixed(1)} ms, p99 ${x.p99.toFixed(1)} ms (${x.steadyEvents} events)`,
  );
}
const dps = median(results.map((x) => x.deliveriesPerSecond));
const p50 = median(results.map((x) => x.p50));
const p99 = median(results.map((x) => x.p99));
console.log(`median: ${dps.toFixed(0)} deliveries/s (target >= 1000: ${(dps / 1000).toFixed(2)}x); at ${RATE} events/s p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms (target < 250 ms: ${(p99 / 250).toFixed(2)} of the limit)`);
receiver.close();
process.exit(0);
