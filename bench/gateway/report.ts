import type { Memory, Target } from './fleet.js';
import { Histogram } from './histogram.js';

/** What the load test measured on one server node of a target. */
export interface NodeResult {
  /** welcomed and open when the joins ended / after the idle hold */
  held: number;
  heldAfterIdle: number;
  join: Histogram;
  /** the join latency of the lessons' first arrivals only (their lesson opens with them) */
  joinFirst: Histogram;
  /** cursor fan-out, by the receiver's node */
  fan: Histogram;
  /** unexpected closes (`closed:<code>`), socket errors, refused upgrades (`upgrade:<status>`), error frames */
  errors: Record<string, number>;
  /** RSS before the measured joins (after the warm-up), holding every connection (at the end of the idle hold), and the peak */
  rssBeforeMb: number;
  rssMb: number;
  rssPeakMb: number;
  /** its memory after a full collection, before the joins and holding every connection (undefined: the probe did not answer) */
  memoryBefore?: Memory;
  memoryHolding?: Memory;
  /** bytes it allocated from before the joins to the end of the idle hold, sampled (--alloc-profile: allocations.ts) */
  allocatedBytes?: number;
  cpuSeconds: number;
  cpuCursorSeconds: number;
  /** the join phase's CPU (from the first join to the last welcome) */
  cpuJoinSeconds: number;
  /** how long its main thread waited for a core during the join phase (runnable, not running) */
  waitJoinSeconds: number;
  /** from the first close to 3 s after the last (the departures' presence changes, pause charges, features' cleanup) */
  cpuLeaveSeconds: number;
  /** CPU s per second while every connection is held and nobody sends (pings, leases, metering flush) */
  idleCpuPerSecond: number;
  /** the cursor phase's CPU less the idle rate over it */
  cpuCursorNetSeconds: number;
}

export interface Result {
  target: Target;
  nodes: NodeResult[];
  /** the warm-up's joins: the servers' first seconds */
  coldJoinP50: number;
  coldJoinP99: number;
  sent: number;
  delivered: number;
  expected: number;
  /** firstOver1s: lessons off by more than 1 s at the first read (3 s after the closes); the rest at the last read (after settledSeconds more) */
  /** the CPU of the Redis servers the target used (gateway, sio), when they run on this machine: ms per join and per departure, s per second idle */
  redis?: { msPerJoin: number; idleCpuPerSecond: number; msPerLeave: number };
  /** the same for the gateway's Postgres when it runs on this machine (all its processes: fleet.ts postgresCpu) */
  postgres?: { msPerJoin: number; idleCpuPerSecond: number; msPerLeave: number };
  billing?: { lessons: number; maxErrorSeconds: number; over1s: number; maxOutsideWindowSeconds: number; firstOver1s?: number; settledSeconds?: number };
  /** the machine during the join phase: the load generator's own CPU (its workers), and every process's (cores busy of `cores`) */
  joinMachine?: { generatorCpuSeconds: number; busyCores: number; cores: number };
}

const MB = 1024 * 1024;
const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);
const fmt = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');

/**
 * Closes the server did not ask for with a close frame (1006: the TCP connection just ended),
 * upgrades refused with 503 (a full node: the connection cap, or a draining one), and every other
 * unexpected end (other close codes, socket errors, upgrades refused with another status).
 */
function closes(errors: Record<string, number>): { abnormal: number; refused503: number; other: number } {
  let abnormal = 0;
  let refused503 = 0;
  let other = 0;
  for (const [k, v] of Object.entries(errors)) {
    if (k.startsWith('closed:1006')) abnormal += v;
    else if (k === 'upgrade:503') refused503 += v;
    else if (k.startsWith('closed:') || k.startsWith('socket error') || k.startsWith('upgrade:')) other += v;
  }
  return { abnormal, refused503, other };
}

/** The figures of a set of nodes taken together (one node, or the whole fleet). */
function figures(nodes: NodeResult[], sent: number) {
  const join = new Histogram();
  const joinFirst = new Histogram();
  const fan = new Histogram();
  const errors: Record<string, number> = {};
  for (const n of nodes) {
    join.merge(n.join);
    joinFirst.merge(n.joinFirst);
    fan.merge(n.fan);
    for (const [k, v] of Object.entries(n.errors)) errors[k] = (errors[k] ?? 0) + v;
  }
  const held = sum(nodes.map((n) => n.held));
  const grown = sum(nodes.map((n) => n.rssMb - n.rssBeforeMb));
  // after a full collection in each node: NaN unless every node answered both probes
  const settled = (f: (m: Memory) => number) =>
    held > 0 ? sum(nodes.map((n) => (n.memoryBefore && n.memoryHolding ? f(n.memoryHolding) - f(n.memoryBefore) : NaN))) / held : NaN;
  return {
    held,
    heldAfterIdle: sum(nodes.map((n) => n.heldAfterIdle)),
    ...closes(errors),
    errors,
    joinP50: join.percentile(50),
    joinP99: join.percentile(99),
    joinFirstP50: joinFirst.percentile(50),
    joinFirstP99: joinFirst.percentile(99),
    fanoutP50: fan.percentile(50),
    fanoutP99: fan.percentile(99),
    rssBeforeMb: sum(nodes.map((n) => n.rssBeforeMb)),
    rssMb: sum(nodes.map((n) => n.rssMb)),
    rssPeakMb: sum(nodes.map((n) => n.rssPeakMb)),
    /** the RSS grown while the connections joined, read at the end of the idle hold, per connection held */
    bytesPerConnection: held > 0 ? (grown * MB) / held : NaN,
    /** the same after a full collection before the joins and again holding them: the RSS grown, V8's live heap grown
     * (the objects the connections keep, whenever the collector runs), and the memory of buffers outside it grown */
    settledBytesPerConnection: settled((m) => m.rss),
    heapBytesPerConnection: settled((m) => m.heapUsed),
    externalBytesPerConnection: settled((m) => m.external),
    /** bytes allocated from before the joins to the end of the idle hold, per connection held (--alloc-profile) */
    allocatedBytesPerConnection: held > 0 && nodes.every((n) => n.allocatedBytes !== undefined) ? sum(nodes.map((n) => n.allocatedBytes!)) / held : undefined,
    cpuSeconds: sum(nodes.map((n) => n.cpuSeconds)),
    cpuCursorSeconds: sum(nodes.map((n) => n.cpuCursorSeconds)),
    cpuPer1000: (sum(nodes.map((n) => n.cpuCursorSeconds)) / sent) * 1000,
    /** what a join costs the servers whether or not the machine keeps up: the join phase's CPU per connection held */
    cpuMsPerJoin: held > 0 ? (sum(nodes.map((n) => n.cpuJoinSeconds)) / held) * 1000 : NaN,
    /** how long the servers' main threads waited for a core while joining, per connection held: the machine's saturation as a join sees it */
    waitMsPerJoin: held > 0 ? (sum(nodes.map((n) => n.waitJoinSeconds)) / held) * 1000 : NaN,
    /** the same for the departures: from the first close to 3 s after the last, per connection held */
    cpuMsPerLeave: held > 0 ? (sum(nodes.map((n) => n.cpuLeaveSeconds)) / held) * 1000 : NaN,
    idleCpuPerSecond: sum(nodes.map((n) => n.idleCpuPerSecond)),
    cpuPer1000Net: (sum(nodes.map((n) => n.cpuCursorNetSeconds)) / sent) * 1000,
  };
}
type Figures = ReturnType<typeof figures>;

export interface RunParams {
  N: number;
  M: number;
  G: number;
  W: number;
  JOIN_RATE: number;
  CURSOR_RATE: number;
  HOLD: number;
  spread: string;
  /** the load generator's WebSocket client (--client) */
  client: string;
  features: string | undefined;
  loadAverage: string;
}

/** Prints the totals of every target side by side, each target's nodes when there are several, the ratios, and the whole as JSON. */
export function printReport(results: Result[], p: RunParams): void {
  const total = new Map(results.map((r) => [r.target, figures(r.nodes, r.sent)]));
  const rows: [string, (r: Result, f: Figures) => string][] = [
    ['connections held after the joins / after the idle hold', (_, f) => `${f.held} / ${f.heldAfterIdle} of ${p.N}`],
    ['unexpected closes: 1006 / other (closes, socket errors, upgrades refused with another status)', (_, f) => `${f.abnormal} / ${f.other}`],
    ['upgrades refused with 503 (a full node: the connection cap)', (r, f) => (r.nodes.length > 1 ? `${f.refused503} (per node ${r.nodes.map((n) => closes(n.errors).refused503).join(', ')})` : `${f.refused503}`)],
    ['join latency p50 / p99 (ms)', (_, f) => `${fmt(f.joinP50)} / ${fmt(f.joinP99)}`],
    ["join latency of the lessons' first arrivals p50 / p99 (ms)", (_, f) => `${fmt(f.joinFirstP50)} / ${fmt(f.joinFirstP99)}`],
    ['join latency, cold: the warm-up joins, p50 / p99 (ms)', (r) => `${fmt(r.coldJoinP50)} / ${fmt(r.coldJoinP99)}`],
    ['cursor fan-out p50 / p99 (ms)', (_, f) => `${fmt(f.fanoutP50)} / ${fmt(f.fanoutP99)}`],
    ['cursor messages sent / deliveries', (r) => `${r.sent} / ${r.delivered} of ${r.expected}`],
    ['errors', (_, f) => JSON.stringify(f.errors)],
    ['server RSS before the joins / holding / peak (MB, all nodes)', (_, f) => `${fmt(f.rssBeforeMb, 0)} / ${fmt(f.rssMb, 0)} / ${fmt(f.rssPeakMb, 0)}`],
    ['bytes per connection (RSS grown while joining, read at the end of the idle hold / connections held)', (_, f) => fmt(f.bytesPerConnection, 0)],
    ["bytes per connection after a full collection (before the joins, holding): RSS grown / V8's live heap grown / buffers outside V8's heap grown", (_, f) => `${fmt(f.settledBytesPerConnection, 0)} / ${fmt(f.heapBytesPerConnection, 0)} / ${fmt(f.externalBytesPerConnection, 0)}`],
    ["bytes allocated per connection held, from before the joins to the end of the idle hold (sampled, --alloc-profile)", (_, f) => (f.allocatedBytesPerConnection === undefined ? '-' : fmt(f.allocatedBytesPerConnection, 0))],
    ['server CPU s (whole run / cursor phase)', (_, f) => `${fmt(f.cpuSeconds)} / ${fmt(f.cpuCursorSeconds)}`],
    ['server CPU ms per join (the join phase\'s CPU / connections held)', (_, f) => fmt(f.cpuMsPerJoin, 3)],
    ["server main thread's wait for a core while joining, ms per join (run queue, /proc/<pid>/schedstat)", (_, f) => fmt(f.waitMsPerJoin, 3)],
    ["the machine while joining: the load generator's CPU ms per join / cores busy of all (every process)", (r, f) =>
      r.joinMachine ? `${fmt((r.joinMachine.generatorCpuSeconds / f.held) * 1000, 3)} / ${fmt(r.joinMachine.busyCores)} of ${r.joinMachine.cores}` : '-'],
    ['server CPU ms per departure (from the first close to 3 s after the last / connections held)', (_, f) => fmt(f.cpuMsPerLeave, 3)],
    ['server CPU s per 1,000 cursor messages', (_, f) => fmt(f.cpuPer1000, 4)],
    ['server CPU s per second idle (all held, nobody sending; the fleet)', (_, f) => fmt(f.idleCpuPerSecond, 4)],
    ['server CPU s per 1,000 cursor messages, net of idle', (_, f) => fmt(f.cpuPer1000Net, 4)],
    ['Redis CPU ms per join / per departure, s per second idle (the Redis servers the target used, on this machine)', (r) => (r.redis ? `${fmt(r.redis.msPerJoin, 3)} / ${fmt(r.redis.msPerLeave, 3)} / ${fmt(r.redis.idleCpuPerSecond, 4)}` : '-')],
    ['Postgres CPU ms per join / per departure, s per second idle (the whole server, on this machine)', (r) => (r.postgres ? `${fmt(r.postgres.msPerJoin, 3)} / ${fmt(r.postgres.msPerLeave, 3)} / ${fmt(r.postgres.idleCpuPerSecond, 4)}` : '-')],
    ['billing: largest error (s), lessons > 1 s', (r) => (r.billing ? `${r.billing.maxErrorSeconds} , ${r.billing.over1s} of ${r.billing.lessons}${r.billing.firstOver1s ? ` (${r.billing.firstOver1s} at the first read, 3 s after the closes; read again for ${r.billing.settledSeconds} s)` : ''}` : '-')],
    ['billing: largest error outside the join-latency window (s)', (r) => (r.billing ? `${r.billing.maxOutsideWindowSeconds}` : '-')],
  ];
  const out = [
    `${p.N} connections, ${p.M} lessons, ${p.G} node(s) per target (spread by ${p.spread}), ${p.W} workers (${p.client} clients), joins ${p.JOIN_RATE}/s, cursors ${p.CURSOR_RATE}/s for ${p.HOLD} s, features ${p.features}; load average at start ${p.loadAverage}`,
    '',
    `| figure | ${results.map((r) => r.target).join(' | ')} |`,
    `|---|${results.map(() => '---').join('|')}|`,
  ];
  for (const [name, f] of rows) out.push(`| ${name} | ${results.map((r) => f(r, total.get(r.target)!)).join(' | ')} |`);

  if (p.G > 1) {
    for (const r of results) {
      out.push('', `${r.target}, per node:`, '', '| node | held / after idle | 1006 / refused 503 / other | join p50 / p99 (ms) | fan-out p99 (ms) | RSS before / holding (MB) | bytes per connection (after a full collection) | CPU s cursor phase | idle core |', '|---|---|---|---|---|---|---|---|---|');
      r.nodes.forEach((n, i) => {
        const f = figures([n], r.sent);
        out.push(`| ${i} | ${f.held} / ${f.heldAfterIdle} | ${f.abnormal} / ${f.refused503} / ${f.other} | ${fmt(f.joinP50)} / ${fmt(f.joinP99)} | ${fmt(f.fanoutP99)} | ${fmt(f.rssBeforeMb, 0)} / ${fmt(f.rssMb, 0)} | ${fmt(f.bytesPerConnection, 0)} (${fmt(f.settledBytesPerConnection, 0)}) | ${fmt(f.cpuCursorSeconds)} | ${fmt(f.idleCpuPerSecond, 3)} |`);
      });
    }
  }

  const g = total.get('gateway');
  if (g) {
    out.push('');
    for (const [t, f] of total) {
      if (t === 'gateway') continue;
      out.push(
        `gateway vs ${t}: CPU per message ${fmt(g.cpuPer1000 / f.cpuPer1000, 3)}x (net of idle ${fmt(g.cpuPer1000Net / f.cpuPer1000Net, 3)}x), ` +
          `bytes per connection ${fmt(g.bytesPerConnection - f.bytesPerConnection, 0)} more (after a full collection: RSS ${fmt(g.settledBytesPerConnection - f.settledBytesPerConnection, 0)}, live heap ${fmt(g.heapBytesPerConnection - f.heapBytesPerConnection, 0)} more), CPU per join ${fmt(g.cpuMsPerJoin / f.cpuMsPerJoin, 2)}x, ` +
          `join p99 ${fmt(g.joinP99 / f.joinP99, 2)}x, fan-out p99 ${fmt(g.fanoutP99 / f.fanoutP99, 2)}x`,
      );
    }
  }
  const json = results.map((r) => {
    const { errors, ...f } = total.get(r.target)!;
    return { target: r.target, ...f, errors, coldJoinP50: r.coldJoinP50, coldJoinP99: r.coldJoinP99, sent: r.sent, delivered: r.delivered, expected: r.expected, billing: r.billing, redis: r.redis, postgres: r.postgres, nodes: r.nodes.map((n) => figures([n], r.sent)) };
  });
  process.stdout.write(`${out.join('\n')}\n\n${JSON.stringify({ params: p, results: json })}\n`);
}
