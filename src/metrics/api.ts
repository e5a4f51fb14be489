import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { METRIC_PREFIX } from './registry.js';

/** Seconds; a partner API request is expected in milliseconds, a report may take seconds. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * The partner API's families. Labels are bounded: `route` is the router's pattern
 * (`/api/partner/v1/lessons/:id`, never the raw path) or `unmatched`, `method` one of a few,
 * `status` an HTTP status; no partner id, key or user id ever.
 */
export interface ApiMetrics {
  /** one finished request: its pattern, method, status and duration */
  request(route: string | undefined, method: string, status: number, seconds: number): void;
  /** a 429: `unauthenticated` (the per-address limit of keyless requests) or `api_key` (the per-key limit) */
  rateLimited(scope: 'unauthenticated' | 'api_key'): void;
  /** requests being served now */
  readonly inFlight: Gauge;
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export function apiMetrics(registry: Registry): ApiMetrics {
  const duration = new Histogram({
    name: `${METRIC_PREFIX}api_request_duration_seconds`,
    help: 'Partner API requests by route pattern, method and status, from arrival to the response handed to the socket.',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const limited = new Counter({
    name: `${METRIC_PREFIX}api_rate_limited_total`,
    help: 'Partner API requests answered 429: scope="unauthenticated" (per client address, no valid key) or "api_key" (per key).',
    labelNames: ['scope'] as const,
    registers: [registry],
  });
  const inFlight = new Gauge({
    name: `${METRIC_PREFIX}api_requests_in_flight`,
    help: 'Partner API requests being served.',
    registers: [registry],
  });
  for (const scope of ['unauthenticated', 'api_key'] as const) limited.labels(scope).inc(0);
  return {
    request(route, method, status, seconds) {
      duration.labels(route ?? 'unmatched', METHODS.has(method) ? method : 'other', String(status)).observe(seconds);
    },
    rateLimited(scope) {
      limited.labels(scope).inc();
    },
    inFlight,
  };
}
