import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { boundedLabel, METRIC_PREFIX } from './registry.js';

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
 * a number in 1000-1015 or 4000-4999 (ours, docs/protocol.md; else `other`), at most 48 distinct
 * codes (a client choosing its own close codes cannot add more). No lesson id, connection id, user id or token
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
}

export function gatewayMetrics(registry: Registry, now: () => number = Date.now): GatewayMetrics {
  let source: GatewaySource | undefined;
  const started = now();
  let lastFlush: number | undefined;
  const messageType = boundedLabel(64);
  const callOp = boundedLabel(32);
  const codes = new Set<string>();
  const codeLabel = (code: number): string => {
    const ok = Number.isInteger(code) && ((code >= 1000 && code <= 1015) || (code >= 4000 && code <= 4999));
    const c = String(code);
    if (!ok || (!codes.has(c) && codes.size >= 48)) return 'other';
    codes.add(c);
    return c;
  };

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
  const messagesIn = new Counter({ name: `${METRIC_PREFIX}gateway_messages_in_total`, help: 'Messages received from participants, by protocol type.', labelNames: ['type'] as const, registers: [registry] });
  const messagesOut = new Counter({ name: `${METRIC_PREFIX}gateway_messages_out_total`, help: 'Messages sent to sockets, by protocol type.', labelNames: ['type'] as const, registers: [registry] });
  const fanOut = new Histogram({
    name: `${METRIC_PREFIX}gateway_fanout_duration_seconds`,
    help: 'One relay, from receipt to the last local socket written.',
    buckets: FANOUT_BUCKETS,
    registers: [registry],
  });
  const closes = new Counter({ name: `${METRIC_PREFIX}gateway_closes_total`, help: 'Sockets closed, by WebSocket close code (docs/protocol.md).', labelNames: ['code'] as const, registers: [registry] });
  const calls = new Histogram({
    name: `${METRIC_PREFIX}gateway_store_call_duration_seconds`,
    help: 'Redis and Postgres calls made by the gateway, by store and operation.',
    labelNames: ['store', 'op'] as const,
    buckets: CALL_BUCKETS,
    registers: [registry],
  });

  // The labelled children, kept per type: a message's count allocates nothing (prom-client's labels()
  // hashes its arguments into a new string on every call). Bounded: at most 64 types, then `other`,
  // and a type not in the first 64 stays out of the cache (a hostile client cannot grow it).
  const inByType = new Map<string, Counter.Internal>();
  const outByType = new Map<string, Counter.Internal>();
  const cache = (m: Map<string, Counter.Internal>, type: string, c: Counter.Internal) => {
    if (m.size < 128) m.set(type, c);
    return c;
  };
  return {
    setSource(s) {
      source = s;
    },
    joined(ms) {
      joins.inc();
      joinLatency.observe(ms / 1000);
    },
    messageIn(type) {
      let c = inByType.get(type);
      c ??= cache(inByType, type, messagesIn.labels(messageType(type)));
      c.inc();
    },
    messageOut(type, count = 1) {
      let c = outByType.get(type);
      c ??= cache(outByType, type, messagesOut.labels(messageType(type)));
      c.inc(count);
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
  };
}
