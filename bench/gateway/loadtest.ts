import { fork, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import postgres from 'postgres';
import { Redis } from 'ioredis';
import { migrate } from '../../src/db/migrate.js';
import { createSql } from '../../src/db/index.js';
import { createApiKey } from '../../src/domain/apiKeys.js';
import { topUp } from '../../src/domain/ledger.js';
import { createPartner } from '../../src/domain/partners.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { descriptorLimit, HAS_BUS, machineCpu, postgresCpu, probe, RELAY_ENTRY, runQueueWaitSeconds, SERVER_RESERVE, staleBuild, usage, WORKER_RESERVE, type Node, type Target } from './fleet.js';
import { readAllocations, topAllocations } from './allocations.js';
import { Histogram } from './histogram.js';
import { printReport, type NodeResult, type Result } from './report.js';
import { commandLine } from '../lib/cli.js';
import { logPort, spawnUntilPort } from '../lib/service.js';
import { checkSocketIo } from '../peers/socketioCheck.js';
import { startRedisCluster, type LocalRedisCluster } from '../../test/helpers/redisCluster.js';

/**
 * Load test of the realtime gateway against baseline relays (`ws`, bare
 * uWebSockets.js, Socket.IO with its Redis adapter), in one run on the same
 * load (docs/benchmarks.md). Everything it needs is started here, on
 * 127.0.0.1: a fresh database (dropped at the end), an API process (lessons
 * and links are created through the real API), --gateways gateway processes
 * sharing that Postgres and one Redis (and as many processes of each relay),
 * and worker processes that hold the connections.
 *
 *   npm run loadtest -- --connections 20000 --lessons 1000 --cursor-rate 5000
 *   npm run loadtest -- --connections 100000 --gateways 6 --target gateway
 *   npm run loadtest -- --connections 2000 --gateways 2 --target gateway --redis-cluster
 *
 * --target: gateway, ws, uws, sio, both (gateway and ws), all (the four), or a
 * comma list (`--target gateway,uws`). The gateways take GATEWAY_MAX_CONNECTIONS
 * (and any other setting) from the environment.
 *
 * Prints, in total and per node: connections held (after the joins and again
 * after the idle hold), unexpected closes (1006 apart), upgrades refused with
 * 503 (a full node: the connection cap), join latency (upgrade
 * request to welcome) p50/p99, cursor fan-out latency p50/p99, server RSS and
 * bytes per connection (the RSS grown while the connections joined / the
 * connections held; and the same after a full collection in every server
 * before the joins and again holding them, with what the connections keep in
 * V8's heap and outside it: probeSignal.ts), CPU seconds (total and per 1,000 cursor messages, raw and
 * net of the idle rate measured over --idle seconds with every connection held
 * and nobody sending: pings, leases, the metering flush), and the largest
 * billing error: every lesson's billed_seconds against the time two or more of
 * its participants were really connected, as the workers measured it.
 *
 * A process here may hold at most `ulimit -n` descriptors (20,000 on the
 * project machine): the connections are spread so that no server node and no
 * worker goes past it (less a reserve for its own descriptors); the run stops
 * at once if they cannot be.
 *
 * Before the measured joins, --warmup connections (default 2 s worth at the
 * join rate) join lessons of their own the same way and leave: the figures are
 * those of a running server, not of its first second (JIT, connection pools,
 * Lua scripts); the cold first second is printed apart ("join latency, cold").
 */
const { values: a } = commandLine('npm run loadtest: the gateway against baseline relays under one load, everything started here on 127.0.0.1 (docs/development.md)', {
  connections: { type: 'string', default: '2000', help: 'participants connected' },
  lessons: { type: 'string', help: 'lessons they are spread over (default: connections / 20)' },
  'join-rate': { type: 'string', default: '1000', help: 'joins per second' },
  'cursor-rate': { type: 'string', default: '5000', help: 'cursor messages per second, in total' },
  hold: { type: 'string', default: '20', help: 'seconds of sending cursors' },
  gateways: { type: 'string', default: '1', help: 'server processes per target, sharing one Postgres and one Redis' },
  spread: { type: 'string', default: 'lesson', help: "lesson: a lesson's connections all go to one node; connection: round-robin over the nodes (gateway and sio only)" },
  workers: { type: 'string', help: 'load worker processes (default: 4, more when the connections need them)' },
  partners: { type: 'string', default: '10', help: 'partners the lessons belong to' },
  target: { type: 'string', default: 'both', help: 'gateway | ws | uws | sio | both (gateway and ws) | all (the four) | a comma list' },
  'per-address': { type: 'string', default: '200', help: 'connections per 127.x source address' },
  'keep-db': { type: 'boolean', default: false, help: 'keep the database of the run' },
  idle: { type: 'string', default: '5', help: "seconds of holding every connection with no traffic (the servers' idle CPU)" },
  warmup: { type: 'string', help: 'joins on lessons of their own before the measured ones (default: two seconds at the join rate)' },
  features: { type: 'string', default: 'on', help: 'on: the lesson features (board, call, chat) as deployed; off: the gateway core' },
  'heap-snapshot': { type: 'boolean', default: false, help: 'V8 heap snapshots of every server before the joins, holding, and after (compare with heapSummary.ts)' },
  'heap-dir': { type: 'string', default: path.join(tmpdir(), 'loadtest-heap'), help: 'where snapshots and allocation profiles go' },
  'alloc-profile': { type: 'boolean', default: false, help: 'every server samples what it allocates (costs CPU: its latency and CPU figures are not comparable)' },
  'over-limit': { type: 'boolean', default: false, help: 'run even when a node gets more connections than a process can hold' },
  'redis-cluster': { type: 'boolean', default: false, help: 'the gateways and the API on a local 3-master Redis Cluster (the relays keep REDIS_URL)' },
  client: { type: 'string', default: 'lean', help: "the load's WebSocket client: lean (bench/gateway/leanClient.ts) or ws (the library)" },
}, {
  environment: {
    LOADTEST_FROM_SOURCE: { help: '1: the gateways run from the sources under tsx instead of the build in dist/' },
    LOADTEST_SERVER_LOG: { help: "a file for the servers' logs" },
    LOADTEST_MEMORY_LOG: { help: "1: each gateway logs process.memoryUsage() every 5 s (with LOADTEST_SERVER_LOG)" },
    LOADTEST_LOG_LEVEL: { default: 'info', help: "the servers' LOG_LEVEL" },
    LOADTEST_GATEWAY_NODE_ARGS: { help: 'node options of the gateway processes (e.g. --cpu-prof --cpu-prof-dir=<dir>)' },
    LOADTEST_WORKER_NODE_ARGS: { help: 'node options of the load workers' },
    UWS_RELAY_IDLE_TIMEOUT: { default: '20', help: "the bare uWS relay's idleTimeout, seconds" },
    'DATABASE_URL, REDIS_URL': { help: 'the Postgres and Redis the run uses; other settings (GATEWAY_MAX_CONNECTIONS, ...) reach the gateways' },
  },
});
const N = Number(a.connections);
const M = Number(a.lessons ?? Math.max(1, Math.round(N / 20)));
const JOIN_RATE = Number(a['join-rate']);
const CURSOR_RATE = Number(a['cursor-rate']);
const HOLD = Number(a.hold);
const G = Number(a.gateways);
const FD_LIMIT = descriptorLimit();
// every worker below the descriptor limit, and at least 4 (the load generator needs CPU as much as descriptors)
const W = Number(a.workers ?? Math.max(4, Math.ceil(N / (FD_LIMIT - WORKER_RESERVE))));
const IDLE = Number(a.idle);
const WARMUP = Number(a.warmup ?? 2 * Number(a['join-rate']));
const SPREAD = a.spread as 'lesson' | 'connection';
const CLIENT = a.client as 'lean' | 'ws';
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
const HEAP_DIR = path.resolve(a['heap-dir']!, run);
const children = new Set<ChildProcess>();
const log = (...x: unknown[]) => process.stderr.write(`[loadtest] ${x.join(' ')}\n`);

// ---- processes --------------------------------------------------------------

/** Node options from a setting of the load test (space-separated; docs/development.md: LOADTEST_GATEWAY_NODE_ARGS, LOADTEST_WORKER_NODE_ARGS). */
const nodeOptions = (name: string): string[] => (process.env[name] ?? '').split(' ').filter(Boolean);

function spawnService(args: string[], env: Record<string, string>, ready: (line: string) => number | undefined): Promise<{ proc: ChildProcess; port: number }> {
  const nodeArgs = args[0] === 'bench/gateway/gatewayEntry.ts' ? nodeOptions('LOADTEST_GATEWAY_NODE_ARGS') : [];
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

/**
 * Postgres allows 100 connections here: a fleet's pools are cut to fit
 * (10 + 3 per gateway up to 4 gateways, 8 + 3 at 5-6) unless set in the environment.
 */
const pools = {
  DATABASE_POOL_SIZE: process.env.DATABASE_POOL_SIZE ?? String(Math.max(2, Math.min(10, Math.floor(48 / G)))),
  DATABASE_READ_POOL_SIZE: process.env.DATABASE_READ_POOL_SIZE ?? '3',
};
const serviceEnv: Record<string, string> = {
  DATABASE_URL: dbUrl,
  REDIS_URL,
  REDIS_KEY_PREFIX: PREFIX,
  HOST: '127.0.0.1',
  LOG_LEVEL: process.env.LOADTEST_LOG_LEVEL ?? 'info',
  EMBED_BASE_URL: 'http://127.0.0.1',
};
// every server answers the probe (a full collection, its memory; with --heap-snapshot a snapshot first): probeSignal.ts
const KEEP_PROBES = a['heap-snapshot'] || a['alloc-profile'];
const PROBE_DIR = KEEP_PROBES ? HEAP_DIR : path.join(tmpdir(), `loadtest-probe-${run}`);
const probeEnv = (target: Target, i: number): Record<string, string> => ({
  LOADTEST_PROBE: path.join(PROBE_DIR, `${target}-${i}`),
  ...(a['heap-snapshot'] ? { LOADTEST_HEAP_SNAPSHOT: '1' } : {}),
  ...(a['alloc-profile'] ? { LOADTEST_ALLOC_PROFILE: '1' } : {}),
});
mkdirSync(PROBE_DIR, { recursive: true });

/** The gateway nodes run before the links are created, as in production: they hear them issued (link_issued). */
function spawnGateways(): Promise<Node[]> {
  return Promise.all(
    Array.from({ length: G }, async (_, i) => {
      const env: Record<string, string> = { ...serviceEnv, ...pools, ...probeEnv('gateway', i), GATEWAY_PORT: '0', LOADTEST_FEATURES: a.features === 'off' ? 'none' : 'default' };
      return { ...(await spawnService(['bench/gateway/gatewayEntry.ts'], env, logPort('gateway listening'))), probeFile: env.LOADTEST_PROBE };
    }),
  );
}

function spawnRelays(target: Exclude<Target, 'gateway'>): Promise<Node[]> {
  const jsonPort = (line: string) => {
    try {
      return (JSON.parse(line) as { port?: number }).port;
    } catch {
      return undefined;
    }
  };
  return Promise.all(
    Array.from({ length: G }, async (_, i) => {
      const env: Record<string, string> = { REDIS_URL, SIO_KEY: `${PREFIX}sio`, ...probeEnv(target, i) };
      return { ...(await spawnService([RELAY_ENTRY[target]], env, jsonPort)), probeFile: env.LOADTEST_PROBE };
    }),
  );
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

/** The node of a lesson's k-th connection. */
const nodeOf = (target: Target, lesson: number, k: number) => (SPREAD === 'connection' && HAS_BUS[target] ? lesson + k : lesson) % G;

/** Stops the run before anything starts if a node or a worker would need more descriptors than a process may have. */
function checkDescriptors(targets: Target[]): void {
  const sizes = Array.from({ length: M }, (_, i) => Math.floor(N / M) + (i < N % M ? 1 : 0));
  for (const t of targets) {
    const perNode = new Array<number>(G).fill(0);
    sizes.forEach((n, i) => {
      for (let k = 0; k < n; k++) perNode[nodeOf(t, i, k)]++;
    });
    const most = Math.max(...perNode);
    if (most > FD_LIMIT - SERVER_RESERVE && !a['over-limit']) {
      throw new Error(`${t}: ${most} connections on one node, over the ${FD_LIMIT - SERVER_RESERVE} a process can hold here (ulimit -n ${FD_LIMIT} less ${SERVER_RESERVE} of its own): use --gateways ${Math.ceil(N / (FD_LIMIT - SERVER_RESERVE))} or more`);
    }
  }
  const perWorker = Array.from({ length: W }, (_, w) => sizes.filter((_, i) => i % W === w).reduce((s, n) => s + n, 0));
  if (Math.max(...perWorker) > FD_LIMIT - WORKER_RESERVE) throw new Error(`a worker would hold ${Math.max(...perWorker)} connections, over ulimit -n ${FD_LIMIT}: use --workers ${Math.ceil(N / (FD_LIMIT - WORKER_RESERVE))} or more`);
}

// ---- one scenario -------------------------------------------------------------

/** `gateways`: the gateway nodes started before the links were created (the servers of the gateway target). */
async function scenario(target: Target, lessons: LessonLinks[], warm: LessonLinks[], gateways: Node[] | undefined): Promise<Result> {
  if (target === 'gateway' && !gateways) throw new Error('the gateway target needs the gateways started before setup');
  const nodes = target === 'gateway' ? gateways! : await spawnRelays(target);
  if (target === 'sio') await Promise.all(nodes.map((n) => checkSocketIo(n.port)));
  const pids = nodes.map((n) => n.proc.pid!);
  const url = (l: LessonLinks, t: string, node: number) => {
    const port = nodes[node].port;
    if (target === 'gateway') return `ws://127.0.0.1:${port}/ws?token=${t}`;
    if (target === 'sio') return `ws://127.0.0.1:${port}/socket.io/?EIO=4&transport=websocket&token=${t}&lesson=${l.id}`;
    return `ws://127.0.0.1:${port}/ws?token=${t}&lesson=${l.id}`;
  };
  const addresses = Array.from({ length: Math.ceil(N / Number(a['per-address'])) }, (_, i) => `127.0.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`);

  const startWorkers = (of: LessonLinks[], offset: number) =>
    Promise.all(
      Array.from({ length: W }, async (_, w) => {
        const proc = fork(path.join(ROOT, 'bench/gateway/worker.ts'), [], { execArgv: ['--import', 'tsx', ...nodeOptions('LOADTEST_WORKER_NODE_ARGS')], cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
        children.add(proc);
        proc.on('exit', () => children.delete(proc));
        const mine = of.map((l, i) => ({ l, i: i + offset })).filter((_, i) => i % W === w);
        proc.send({
          cmd: 'init',
          lessons: mine.map(({ l, i }) => ({ id: l.id, urls: l.tokens.map((t, k) => url(l, t, nodeOf(target, i, k))), nodes: l.tokens.map((_, k) => nodeOf(target, i, k)) })),
          nodeCount: G,
          proto: target === 'sio' ? 'sio' : 'json',
          localAddresses: addresses.filter((_, i) => i % W === w),
          client: CLIENT,
          joinRate: JOIN_RATE / W,
          cursorRate: CURSOR_RATE / W,
          holdSeconds: HOLD,
        });
        await next(proc, 'ready');
        return proc;
      }),
    );
  const sample = () => pids.map(usage);
  // the Redis servers the target uses, when they run on this machine: their CPU is the fleet's too
  const redisPids = target === 'gateway' || target === 'sio' ? await localRedisPids(target === 'gateway' && !!redisCluster) : [];
  // and the gateway's Postgres, when it runs here (the API's share is in it too, but the API is idle during the phases)
  const usesPostgres = target === 'gateway' && postgresCpu() !== undefined;
  const serviceCpu = () => ({ redis: sum(redisPids.map((p) => usage(p).cpu)), pg: usesPostgres ? postgresCpu()! : 0 });
  const phase = async (workers: ChildProcess[], cmd: string, ev: string) => {
    const peak = sample().map((u) => u.rssMb);
    const timer = setInterval(() => sample().forEach((u, i) => (peak[i] = Math.max(peak[i], u.rssMb))), 250);
    const before = sample();
    const t = performance.now();
    const replies = await Promise.all(workers.map((w) => (w.send({ cmd }), next(w, ev))));
    clearInterval(timer);
    const after = sample();
    return { replies, cpu: after.map((u, i) => u.cpu - before[i].cpu), seconds: (performance.now() - t) / 1000, peak: after.map((u, i) => Math.max(peak[i], u.rssMb)) };
  };
  // how saturated the machine is (read around the measured joins only): the servers' main threads'
  // wait for a core, the load generator's own CPU, and every process's
  const saturation = (workers: ChildProcess[]) => ({ wait: pids.map(runQueueWaitSeconds), generator: sum(workers.map((w) => usage(w.pid!).cpu)), machine: machineCpu() });

  // warm-up: the same joins on lessons of their own, then they leave
  const cold = new Histogram();
  if (warm.length > 0) {
    log(`${target}: warm-up, joining ${warm.reduce((s, l) => s + l.tokens.length, 0)} connections at ${JOIN_RATE}/s`);
    const warmers = await startWorkers(warm, lessons.length);
    for (const r of (await phase(warmers, 'join', 'joined')).replies) for (const h of r.join) cold.merge(new Histogram(h));
    await phase(warmers, 'close', 'closed');
    for (const w of warmers) w.send({ cmd: 'exit' });
    await new Promise((r) => setTimeout(r, 2000));
  }
  const workers = await startWorkers(lessons, 0);
  // the servers' memory before the joins, after a full collection (and the first heap snapshots)
  const probeBefore = await probe(nodes, 1);
  if (a['heap-snapshot']) log(`${target}: heap snapshots before the joins: ${probeBefore.snapshots.join(', ')}`);
  const start = sample();
  const svcStart = serviceCpu();

  log(`${target}: joining ${N} connections at ${JOIN_RATE}/s over ${G} node(s)`);
  const sat0 = saturation(workers);
  const joined = await phase(workers, 'join', 'joined');
  const sat1 = saturation(workers);
  const svcJoined = serviceCpu();
  await new Promise((r) => setTimeout(r, 2000));
  // the servers' cost of holding the connections with nobody sending (pings, leases, metering flush)
  const idle0 = sample();
  const svcIdle0 = serviceCpu();
  const idleT = performance.now();
  await new Promise((r) => setTimeout(r, IDLE * 1000));
  const idle1 = sample();
  const svcIdle1 = serviceCpu();
  const idleSeconds = (performance.now() - idleT) / 1000;
  const counted = await Promise.all(workers.map((w) => (w.send({ cmd: 'count' }), next(w, 'counted'))));
  // and holding every connection, after a full collection: what the connections keep, whatever the collector's timing
  const probeHolding = await probe(nodes, 2);
  if (a['heap-snapshot']) log(`${target}: heap snapshots holding every connection: ${probeHolding.snapshots.join(', ')}`);
  const holding = counted.reduce((s, r) => s + sum(r.held), 0);
  const allocations = a['alloc-profile'] ? nodes.map((n) => readAllocations(`${n.probeFile}.2.heapprofile`)) : [];
  if (a['alloc-profile']) logAllocations(target, allocations, holding);
  log(`${target}: holding ${holding}; cursors at ${CURSOR_RATE}/s for ${HOLD} s`);
  const cursored = await phase(workers, 'cursor', 'cursored');
  log(`${target}: closing`);
  const closing = sample();
  const svcClosing = serviceCpu();
  const closed = await phase(workers, 'close', 'closed');
  const end = sample();
  // what the departures cost: their presence changes, pause charges and features' cleanup run after the closes
  await new Promise((r) => setTimeout(r, LEAVE_SETTLE_MS));
  const left = sample();
  const svcLeft = serviceCpu();
  if (a['heap-snapshot']) log(`${target}: heap snapshots after every connection left: ${(await probe(nodes, 3)).snapshots.join(', ')}`);

  const sent = cursored.replies.reduce((s, r) => s + r.sent, 0);
  const perNode: NodeResult[] = nodes.map((_, i) => {
    const join = new Histogram();
    for (const r of joined.replies) join.merge(new Histogram(r.join[i]));
    const joinFirst = new Histogram();
    for (const r of joined.replies) joinFirst.merge(new Histogram(r.joinFirst[i]));
    const fan = new Histogram();
    for (const r of cursored.replies) fan.merge(new Histogram(r.fanout[i]));
    const errors: Record<string, number> = {};
    for (const r of closed.replies) for (const [k, v] of Object.entries(r.errors[i] as Record<string, number>)) errors[k] = (errors[k] ?? 0) + v;
    const idleRate = IDLE > 0 ? (idle1[i].cpu - idle0[i].cpu) / idleSeconds : 0;
    return {
      held: joined.replies.reduce((s, r) => s + r.held[i], 0),
      heldAfterIdle: counted.reduce((s, r) => s + r.held[i], 0),
      join,
      joinFirst,
      fan,
      errors,
      rssBeforeMb: start[i].rssMb,
      // at the end of the idle hold: the joins' garbage had its seconds to go
      rssMb: idle1[i].rssMb,
      memoryBefore: probeBefore.memory[i],
      memoryHolding: probeHolding.memory[i],
      allocatedBytes: allocations[i]?.total,
      rssPeakMb: Math.max(joined.peak[i], cursored.peak[i], closed.peak[i]),
      cpuSeconds: end[i].cpu - start[i].cpu,
      cpuCursorSeconds: cursored.cpu[i],
      cpuJoinSeconds: joined.cpu[i],
      waitJoinSeconds: sat1.wait[i] - sat0.wait[i],
      cpuLeaveSeconds: left[i].cpu - closing[i].cpu,
      idleCpuPerSecond: idleRate,
      cpuCursorNetSeconds: Math.max(0, cursored.cpu[i] - idleRate * cursored.seconds),
    };
  });
  const cold99 = { coldJoinP50: cold.percentile(50), coldJoinP99: cold.percentile(99) };
  const result: Result = {
    target,
    nodes: perNode,
    ...cold99,
    sent,
    delivered: cursored.replies.reduce((s, r) => s + r.received, 0),
    expected: cursored.replies.reduce((s, r) => s + r.expected, 0),
    joinMachine: {
      generatorCpuSeconds: sat1.generator - sat0.generator,
      busyCores: ((sat1.machine.busy - sat0.machine.busy) / (sat1.machine.total - sat0.machine.total)) * cpus().length,
      cores: cpus().length,
    },
  };
  const held = sum(perNode.map((n) => n.held));
  const serviceFigures = (k: 'redis' | 'pg') => ({
    msPerJoin: ((svcJoined[k] - svcStart[k]) / held) * 1000,
    idleCpuPerSecond: IDLE > 0 ? (svcIdle1[k] - svcIdle0[k]) / idleSeconds : 0,
    msPerLeave: ((svcLeft[k] - svcClosing[k]) / held) * 1000,
  });
  if (redisPids.length > 0) result.redis = serviceFigures('redis');
  if (usesPostgres) result.postgres = serviceFigures('pg');
  if (target === 'gateway') {
    const together: Record<string, number> = Object.assign({}, ...closed.replies.map((r) => r.together));
    (globalThis as { spans?: unknown }).spans = Object.assign({}, ...closed.replies.map((r) => r.spans));
    const fromRequest: Record<string, number> = Object.assign({}, ...closed.replies.map((r) => r.togetherFromRequest));
    // A saturated fleet may still be writing the departures' charges: read again (at most 90 s more)
    // while some lesson is off by more than a second; what is still off then is a billing error.
    const first = await checkBilling(lessons, together, fromRequest);
    let billing = first;
    const t0 = performance.now();
    while (billing.over1s > 0 && performance.now() - t0 < 90_000) {
      await new Promise((r) => setTimeout(r, 5000));
      billing = await checkBilling(lessons, together, fromRequest);
    }
    result.billing = { ...billing, firstOver1s: first.over1s, settledSeconds: Math.round((performance.now() - t0) / 1000) };
  }
  for (const w of workers) w.send({ cmd: 'exit' });
  await Promise.all(nodes.map((n) => (n.proc.kill('SIGTERM'), new Promise((r) => (n.proc.exitCode !== null ? r(undefined) : n.proc.once('exit', r))))));
  return result;
}

const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);
/** After the last close: the departures' work (presence, pause charges, features) is counted until then, and billing is read then. */
const LEAVE_SETTLE_MS = 3000;

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

// ---- --redis-cluster --------------------------------------------------------

/**
 * The process ids of the Redis servers a target uses (REDIS_URL's, or the local cluster's masters),
 * from their own INFO, when they listen on this machine's loopback ([] otherwise: their CPU is not ours to read).
 */
async function localRedisPids(cluster: boolean): Promise<number[]> {
  const urls = cluster ? redisCluster!.ports.map((p) => `redis://127.0.0.1:${p}`) : [REDIS_URL];
  const out: number[] = [];
  for (const u of urls) {
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(new URL(u).hostname)) return [];
    const r = new Redis(u, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await r.connect();
      const pid = /process_id:(\d+)/.exec(await r.info('server'))?.[1];
      if (pid) out.push(Number(pid));
    } catch {
      return [];
    } finally {
      r.disconnect();
    }
  }
  return out;
}

let redisCluster: LocalRedisCluster | undefined;

/** Starts a local 3-master Redis Cluster (as the tests do) and points the gateways and the API at it. */
async function useRedisCluster(): Promise<void> {
  redisCluster = await startRedisCluster(3);
  serviceEnv.REDIS_CLUSTER_NODES = redisCluster.nodes;
  log(`Redis Cluster of 3 masters at ${redisCluster.nodes} (the gateways and the API; the relays stay on ${REDIS_URL})`);
}

async function stopRedisCluster(): Promise<void> {
  await redisCluster?.stop();
  redisCluster = undefined;
}

// ---- main -------------------------------------------------------------------

const TARGETS: readonly Target[] = ['gateway', 'ws', 'uws', 'sio'];

/** `--target`: one name, `both` (gateway, ws), `all` (the four), or a comma list of names (`gateway,uws`), run in the order given. */
function parseTargets(arg: string): Target[] {
  if (arg === 'all') return [...TARGETS];
  if (arg === 'both') return ['gateway', 'ws'];
  const names = arg.split(',').map((t) => t.trim()).filter(Boolean);
  const bad = names.filter((t) => !TARGETS.includes(t as Target));
  if (names.length === 0 || bad.length > 0) throw new Error(`--target must be ${TARGETS.join(', ')}, both, all or a comma list of the four (got ${JSON.stringify(arg)})`);
  return [...new Set(names)] as Target[];
}

/** --alloc-profile: the functions that allocated the most, summed over the target's nodes, per connection held. */
function logAllocations(target: Target, profiles: ReturnType<typeof readAllocations>[], held: number): void {
  log(`${target}: allocated per connection held, by function (sampled heap profiles in ${PROBE_DIR}):`);
  for (const { bytes, where } of topAllocations(profiles.filter((p) => p !== undefined), held)) log(`  ${Math.round(bytes).toString().padStart(7)} B  ${where}`);
}

async function cleanup(): Promise<void> {
  for (const c of children) c.kill('SIGKILL');
  if (!KEEP_PROBES) rmSync(PROBE_DIR, { recursive: true, force: true });
  await stopRedisCluster();
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

try {
  const load = loadavg().map((x) => x.toFixed(2)).join(' ');
  log(`${N} connections over ${M} lessons, ${G} node(s) per target (spread by ${SPREAD}), ${W} workers (${CLIENT} clients), join ${JOIN_RATE}/s, cursors ${CURSOR_RATE}/s for ${HOLD} s, lesson features ${a.features}; load average at start ${load}; ulimit -n ${FD_LIMIT}`);
  const targets = parseTargets(a.target!);
  if (!['lesson', 'connection'].includes(SPREAD)) throw new Error('--spread must be lesson or connection');
  if (!['lean', 'ws'].includes(CLIENT)) throw new Error('--client must be lean or ws');
  checkDescriptors(targets);
  // the gateway runs from the build, as in production (gatewayEntry.ts): never from a build older than the sources
  if (targets.includes('gateway') && process.env.LOADTEST_FROM_SOURCE !== '1') {
    const stale = staleBuild(ROOT);
    if (stale.length > 0) throw new Error(`the build is older than ${stale.length} source file(s) (${stale.slice(0, 3).join(', ')}): run npm run build first, or LOADTEST_FROM_SOURCE=1 to run the gateway from the sources under tsx`);
  }
  if (a['redis-cluster']) await useRedisCluster();
  await migrate(dbUrl);
  const gateways = targets.includes('gateway') ? await spawnGateways() : undefined;
  const { lessons, warm } = await setup();
  const results: Result[] = [];
  for (const t of targets) results.push(await scenario(t, lessons, warm, gateways));
  printReport(results, { N, M, G, W, JOIN_RATE, CURSOR_RATE, HOLD, spread: SPREAD, features: a.features, client: CLIENT, loadAverage: load });
} finally {
  await cleanup();
}

