import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { boundedLabel, METRIC_PREFIX } from './registry.js';
import { CloseCode } from '../../realtime/protocol/closeCodes.js';

/** Close codes with a label of their own: the standard ones and the gateway's (realtime/protocol/closeCodes.ts). */
const KNOWN_CLOSE_CODES = new Set<number>([...Array.from({ length: 16 }, (_, i) => 1000 + i), ...Object.values(CloseCode)]);

/** Seconds: a join (token check, seed, welcome) is tens of milliseconds. */
const JOIN_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** Seconds: a relay to the lesson's sockets on this node, or a bus hop to another node. */
const FANOUT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
/** Seconds: one Redis or Postgres call. */
const CALL_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** What the gateway knows at any moment; read on each scrape, so the gauges cannot drift. */
export interface GatewaySource {
  /** WebSocket connections open on this node */
  connections(): number;
  /** lessons with at least one socket (or a live room) on this node */
  lessonsOpen(): number;
  /** metered sessions running among the lessons open here */
  sessionsRunning(): number;
}

/**
 * The gateway's families behind a small typed object, so realtime/ calls
 * `metrics.joined(ms)` and never touches prom-client. Labels are bounded: message `type` and call
 * `op` pass through boundedLabel (at most 64 and 32 distinct values, then `other`), close `code` is
 * a standard code (1000-1015) or one of the gateway's own (docs/protocol.md), any other `other` (a
 * client choosing its own close codes cannot add series or crowd ours out). No lesson id, connection id, user id or token
 * is ever a label. Event-loop delay is prom-client's default `nodejs_eventloop_lag_*` (p50/p90/p99).
 */
export interface GatewayMetrics {
  /** the gateway reads its gauges from `source` on each scrape */
  setSource(source: GatewaySource): void;
  /** a participant joined (welcome sent) `ms` after the socket's upgrade */
  joined(ms: number): void;
  /** a message of this protocol type arrived from a participant */
  messageIn(type: string): void;
  /** `count` messages of this type were sent to sockets (a fan-out to 5 sockets counts 5) */
  messageOut(type: string, count?: number): void;
  /** one relay from receipt to the last local socket written (or published to the bus) */
  fanOut(ms: number): void;
  /** a socket closed with this WebSocket close code (ours or the client's) */
  closed(code: number): void;
  /** the meter's flush to Postgres succeeded (the lag gauge is the time since the last one) */
  meterFlushed(at?: number): void;
  /** one Redis or Postgres call took `ms` (`op`: a short fixed lowercase name, e.g. `presence.join`, `meter.flush`) */
  call(store: 'redis' | 'postgres', op: string, ms: number): void;
  /** an upgrade was refused (`reason`: a short fixed name, UPGRADE_REFUSALS or a feature's refusal code) */
  upgradeRefused(reason: string): void;
  /** the node's connection cap (GATEWAY_MAX_CONNECTIONS or the automatic one), set at start */
  connectionCap(max: number): void;
  /** one lesson's board operations were refused because its commit failed for good (`cause`: `lesson` when its own batch caused it, `transient` when the database did) */
  boardCommitFailed(cause: 'lesson' | 'transient'): void;
  /** one lesson's row was left out of a batched write because Postgres refuses it for good (the rest of the batch is written) */
  writeRefused(what: RefusedWrite): void;
}

/** The gateway's batched writes that leave out a row Postgres refuses for good: the `what` label of `lessons_gateway_writes_refused_total`. */
export const REFUSED_WRITES = ['participant.joined', 'presence marks', 'meter charge', 'meter snapshot'] as const;
export type RefusedWrite = (typeof REFUSED_WRITES)[number];

/** Why the gateway refused an upgrade: the `reason` label of `lessons_gateway_upgrades_refused_total` (docs/operations.md). */
export const UPGRADE_REFUSALS = ['full', 'draining', 'not_handshake', 'origin', 'per_ip', 'unauthorized', 'archived', 'unavailable'] as const;

/**
 * A histogram without labels kept in a Float64Array: observe() allocates nothing (prom-client's
 * Histogram.observe makes a closure and objects per call). The registry reads it through get(), in
 * the shape prom-client's own histograms give (cumulative `le` buckets, `_sum`, `_count`).
 */
class TallyHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length);
  }
  observe(value: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]) i++;
    if (i < b.length) this.counts[i]++;
    this.sum += value;
    this.count++;
  }
  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
  async get() {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    let acc = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      acc += this.counts[i];
      values.push({ labels: { le: this.bounds[i] }, value: acc, metricName: `${this.name}_bucket` });
    }
    values.push({ labels: { le: '+Inf' }, value: this.count, metricName: `${this.name}_bucket` });
    values.push({ labels: {}, value: this.sum, metricName: `${this.name}_sum` });
    values.push({ labels: {}, value: this.count, metricName: `${this.name}_count` });
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

export function gatewayMetrics(registry: Registry, now: () => number = Date.now): GatewayMetrics {
  let source: GatewaySource | undefined;
  const started = now();
  let lastFlush: number | undefined;
  const messageType = boundedLabel(64);
  const callOp = boundedLabel(32);
  // The standard codes (1000-1015) and the service's own (CloseCode) each have a label from the
  // start; any other code a client picks is `other`, so a client cannot crowd ours out.
  const codeLabel = (code: number): string => (KNOWN_CLOSE_CODES.has(code) ? String(code) : 'other');

  // Gauges read on each scrape, from the source or the flush time.
  const readOnScrape = (name: string, help: string, read: () => number) =>
    new Gauge({ name: `${METRIC_PREFIX}${name}`, help, registers: [registry], collect() { this.set(read()); } });
  readOnScrape('gateway_connections', 'WebSocket connections held by this gateway.', () => source?.connections() ?? 0);
  readOnScrape('gateway_lessons_open', 'Lessons open on this gateway (at least one socket here).', () => source?.lessonsOpen() ?? 0);
  readOnScrape('gateway_sessions_running', 'Metered sessions running in the lessons open on this gateway.', () => source?.sessionsRunning() ?? 0);
  readOnScrape(
    'gateway_meter_flush_lag_seconds',
    'Seconds since the meter last flushed to Postgres (since start until the first flush); grows while flushes fail.',
    () => Math.max(0, (now() - (lastFlush ?? started)) / 1000),
  );
  const joins = new Counter({ name: `${METRIC_PREFIX}gateway_joins_total`, help: 'Participants joined (welcome sent); rate() gives joins per second.', registers: [registry] });
  const joinLatency = new Histogram({
    name: `${METRIC_PREFIX}gateway_join_duration_seconds`,
    help: 'From the WebSocket upgrade to the welcome.',
    buckets: JOIN_BUCKETS,
    registers: [registry],
  });
  // Per-message counts and the fan-out histogram are on the cursor path: they are kept in plain
  // numbers and handed to prom-client on each scrape (its inc()/observe() build a label hash string
  // and objects on every call). A type's tally object is made once (at most 128 kept).
  const inByType = new Map<string, { n: number }>();
  const outByType = new Map<string, { n: number }>();
  const tally = (m: Map<string, { n: number }>, type: string) => {
    let t = m.get(type);
    if (!t) {
      t = { n: 0 };
      if (m.size < 128) m.set(type, t);
    }
    return t;
  };
  const handOver = (m: Map<string, { n: number }>, counter: Counter<'type'>) => {
    for (const [type, t] of m) {
      if (t.n > 0) counter.labels(messageType(type)).inc(t.n);
      t.n = 0;
    }
  };
  const messagesIn: Counter<'type'> = new Counter({
    name: `${METRIC_PREFIX}gateway_messages_in_total`,
    help: 'Messages received from participants, by protocol type.',
    labelNames: ['type'] as const,
    registers: [registry],
    collect() {
      handOver(inByType, messagesIn);
    },
  });
  const messagesOut: Counter<'type'> = new Counter({
    name: `${METRIC_PREFIX}gateway_messages_out_total`,
    help: 'Messages sent to sockets, by protocol type.',
    labelNames: ['type'] as const,
    registers: [registry],
    collect() {
      handOver(outByType, messagesOut);
    },
  });
  const fanOut = new TallyHistogram(
    `${METRIC_PREFIX}gateway_fanout_duration_seconds`,
    'One relay, from receipt to the last local socket written.',
    FANOUT_BUCKETS,
  );
  registry.registerMetric(fanOut as unknown as Parameters<Registry['registerMetric']>[0]);
  const closes = new Counter({
    name: `${METRIC_PREFIX}gateway_closes_total`,
    help: 'Sockets closed, by WebSocket close code (docs/protocol.md; a code neither standard nor ours is `other`).',
    labelNames: ['code'] as const,
    registers: [registry],
  });
  const boardFailures = new Counter({
    name: `${METRIC_PREFIX}board_commit_failures_total`,
    help: "Lessons whose board operations were refused because a commit failed for good (cause: `lesson`, its own batch; `transient`, the database). The log line names the lesson.",
    labelNames: ['cause'] as const,
    registers: [registry],
  });
  for (const c of ['lesson', 'transient']) boardFailures.labels(c).inc(0);
  const writesRefused = new Counter({
    name: `${METRIC_PREFIX}gateway_writes_refused_total`,
    help: "Rows of one lesson left out of a batched write because Postgres refuses them for good (a data, constraint or limit error); the rest of the batch is written. The log line names the lesson.",
    labelNames: ['what'] as const,
    registers: [registry],
  });
  for (const w of REFUSED_WRITES) writesRefused.labels(w).inc(0);
  let cap = 0;
  readOnScrape('gateway_connection_cap', 'Sockets (open or upgrading) this gateway holds at most; past it upgrades get 503 and /readyz 503.', () => cap);
  const refusalReason = boundedLabel(24);
  const refused = new Counter({
    name: `${METRIC_PREFIX}gateway_upgrades_refused_total`,
    help: 'WebSocket upgrades refused, by reason (full: the connection cap; docs/protocol.md, "The upgrade").',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  // every known reason reads 0 from the start, so rate() and alerts see the series before the first refusal
  for (const r of UPGRADE_REFUSALS) refused.labels(refusalReason(r)).inc(0);
  const calls = new Histogram({
    name: `${METRIC_PREFIX}gateway_store_call_duration_seconds`,
    help: 'Redis and Postgres calls made by the gateway, by store and operation.',
    labelNames: ['store', 'op'] as const,
    buckets: CALL_BUCKETS,
    registers: [registry],
  });

  return {
    setSource(s) {
      source = s;
    },
    joined(ms) {
      joins.inc();
      joinLatency.observe(ms / 1000);
    },
    messageIn(type) {
      const t = inByType.get(type);
      if (t) t.n++;
      else messagesIn.labels(messageType(type)).inc();
      tally(inByType, type);
    },
    messageOut(type, count = 1) {
      const t = outByType.get(type);
      if (t) t.n += count;
      else messagesOut.labels(messageType(type)).inc(count);
      tally(outByType, type);
    },
    fanOut(ms) {
      fanOut.observe(ms / 1000);
    },
    closed(code) {
      closes.labels(codeLabel(code)).inc();
    },
    meterFlushed(at = now()) {
      lastFlush = at;
    },
    call(store, op, ms) {
      calls.labels(store, callOp(op)).observe(ms / 1000);
    },
    upgradeRefused(reason) {
      refused.labels(refusalReason(reason)).inc();
    },
    connectionCap(max) {
      cap = max;
    },
    boardCommitFailed(cause) {
      boardFailures.labels(cause).inc();
    },
    writeRefused(what) {
      writesRefused.labels(what).inc();
    },
  };
}
