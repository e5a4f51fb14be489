import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Deps } from '../deps.js';
import { METRIC_PREFIX } from './registry.js';

/** Seconds; an attempt is bounded by WEBHOOK_TIMEOUT_MS (10 s by default). */
const LATENCY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** 1 + the retry schedule's 8 retries by default */
const ATTEMPT_BUCKETS = [1, 2, 3, 4, 5, 6, 7, 8, 9];
/** The outbox query on scrape gives up after this long (the gauges keep their last value). */
export const OUTBOX_QUERY_TIMEOUT_MS = 2000;

export type DeliveryResult = 'delivered' | 'http_error' | 'network_error' | 'internal_error';

/**
 * The webhook dispatcher's families. No label carries a partner id (unbounded: one per partner),
 * an URL or an event id; `result` is one of four values.
 */
export interface DispatcherMetrics {
  /** one attempt finished (whatever its result), and how long it took */
  attempt(result: DeliveryResult, seconds: number): void;
  /** an event's delivery ended: delivered at attempt `attempts`, or given up after it */
  finished(delivered: boolean, attempts: number): void;
}

/**
 * `deps.sql` and `deps.clock` feed the outbox gauges, computed on each scrape by one indexed
 * query (webhook_deliveries_due) under a statement timeout: pending deliveries, those due now, and
 * the age of the oldest due one (0 when none is due). Every dispatcher reports the same outbox:
 * aggregate with max(), not sum().
 */
export function dispatcherMetrics(registry: Registry, deps: Pick<Deps, 'sql' | 'clock' | 'log'>): DispatcherMetrics {
  const attempts = new Counter({
    name: `${METRIC_PREFIX}webhook_deliveries_total`,
    help: 'Webhook delivery attempts by result: delivered (2xx), http_error (another status), network_error (no answer: refused, reset, timeout, TLS, address rules), internal_error (the secret could not be opened).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: `${METRIC_PREFIX}webhook_delivery_duration_seconds`,
    help: 'Duration of one webhook delivery attempt, from connecting to the answer (or the failure).',
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const perEvent = new Histogram({
    name: `${METRIC_PREFIX}webhook_attempts_per_event`,
    help: 'Attempts an event took before its delivery ended (outcome="delivered" or "undelivered": given up after the last retry).',
    labelNames: ['outcome'] as const,
    buckets: ATTEMPT_BUCKETS,
    registers: [registry],
  });
  const log = deps.log.child({ component: 'metrics' });
  const scrapeErrors = new Counter({
    name: `${METRIC_PREFIX}webhook_outbox_scrape_errors_total`,
    help: 'Scrapes whose outbox query failed or timed out (the outbox gauges then keep their previous values).',
    registers: [registry],
  });
  let last: Promise<{ pending: number; due: number; age: number } | null> | null = null;
  // One query per scrape serves all three gauges (collect() is called once per gauge).
  const outbox = () =>
    (last ??= (async () => {
      try {
        const now = deps.clock.now();
        const [row] = await deps.sql.begin(async (tx) => {
          await tx`SELECT set_config('statement_timeout', ${String(OUTBOX_QUERY_TIMEOUT_MS)}, true)`;
          return tx<{ pending: number; due: number; oldest: Date | null }[]>`
            SELECT count(*)::int AS pending,
                   count(*) FILTER (WHERE next_attempt_at <= ${now})::int AS due,
                   min(next_attempt_at) FILTER (WHERE next_attempt_at <= ${now}) AS oldest
            FROM webhook_deliveries WHERE state = 'pending'`;
        });
        return { pending: row.pending, due: row.due, age: row.oldest ? Math.max(0, (now.getTime() - row.oldest.getTime()) / 1000) : 0 };
      } catch (err) {
        scrapeErrors.inc();
        log.warn({ err: err instanceof Error ? err.message : String(err) }, 'outbox gauges: query failed');
        return null;
      } finally {
        setImmediate(() => (last = null));
      }
    })());
  new Gauge({
    name: `${METRIC_PREFIX}webhook_outbox_depth`,
    help: 'Webhook deliveries waiting (state pending): when="due" may be sent now, when="all" includes retries scheduled later.',
    labelNames: ['when'] as const,
    registers: [registry],
    async collect() {
      const o = await outbox();
      if (!o) return;
      this.labels('all').set(o.pending);
      this.labels('due').set(o.due);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}webhook_outbox_oldest_due_age_seconds`,
    help: 'How long the oldest due webhook delivery has been due (0 when none is): the dispatchers\' backlog in time.',
    registers: [registry],
    async collect() {
      const o = await outbox();
      if (o) this.set(o.age);
    },
  });
  for (const r of ['delivered', 'http_error', 'network_error', 'internal_error'] as const) attempts.labels(r).inc(0);
  return {
    attempt(result, seconds) {
      attempts.labels(result).inc();
      latency.observe(seconds);
    },
    finished(delivered, n) {
      perEvent.labels(delivered ? 'delivered' : 'undelivered').observe(n);
    },
  };
}
