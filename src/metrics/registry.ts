import { createServer, type Server } from 'node:http';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { Deps } from '../deps.js';
import { checkReadiness } from '../lib/readiness.js';

/** Every family of ours starts with this; prom-client's default process metrics keep their own names. */
export const METRIC_PREFIX = 'lessons_';

/**
 * One registry per process: prom-client's default process metrics (CPU, memory, GC, handles,
 * event-loop delay as `nodejs_eventloop_lag_*`) plus the families of the roles the process runs
 * (src/metrics/api.ts, dispatcher.ts, gateway.ts), each registered once.
 */
export function createRegistry(labels: Record<string, string> = {}): Registry {
  const registry = new Registry();
  if (Object.keys(labels).length > 0) registry.setDefaultLabels(labels);
  collectDefaultMetrics({ register: registry });
  return registry;
}

/**
 * A label value from an open set, bounded: a name (lowercase letter, then at most 31 of
 * `a-z0-9_.:-`), and only the first `max` distinct names; anything else, or a later new name, is
 * `other`. Callers pass names from code (a protocol type after parsing, an operation name), never
 * input as such; this is the backstop that keeps a mistake from growing the series or carrying an id.
 */
export function boundedLabel(max: number): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    const v = /^[a-z][a-z0-9_.:-]{0,31}$/.test(value) ? value : 'other';
    if (seen.has(v)) return v;
    if (seen.size >= max) return 'other';
    seen.add(v);
    return v;
  };
}

export interface MetricsServer {
  server: Server;
  port: number;
  close: () => Promise<void>;
}

/**
 * The metrics listener (METRICS_PORT on HOST), never the public API port: `GET /metrics` in the
 * Prometheus text format, plus `/healthz` and `/readyz` as on the API (so a process without an
 * HTTP port of its own, the dispatcher, can be health-checked). Nothing else is served.
 */
export async function serveMetrics(registry: Registry, deps: Pick<Deps, 'sql' | 'redis' | 'log'>, port: number, host: string): Promise<MetricsServer> {
  const log = deps.log.child({ component: 'metrics' });
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const reply = (status: number, type: string, body: string) => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return reply(405, 'text/plain', 'method not allowed\n');
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => reply(200, registry.contentType, text),
        (err: unknown) => {
          log.error({ err: String(err) }, 'collecting metrics failed');
          reply(500, 'text/plain', 'collecting metrics failed\n');
        },
      );
    } else if (path === '/healthz') {
      reply(200, 'application/json', '{"status":"ok"}');
    } else if (path === '/readyz') {
      void checkReadiness(deps).then((r) => reply(r.ready ? 200 : 503, 'application/json', JSON.stringify(r)));
    } else {
      reply(404, 'text/plain', 'not found\n');
    }
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  return {
    server,
    port: typeof address === 'object' && address ? address.port : port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * `lessons_ready{dependency}`: 1 while Postgres (`postgres`) and Redis (`redis`) answer this process
 * (the check behind /readyz, run on each scrape, 2 s at most), else 0.
 */
export function readinessGauge(registry: Registry, deps: Pick<Deps, 'sql' | 'redis'>): void {
  new Gauge({
    name: `${METRIC_PREFIX}ready`,
    help: 'Whether this process reaches its dependency (the /readyz check, run on scrape): 1 yes, 0 no.',
    labelNames: ['dependency'] as const,
    registers: [registry],
    async collect() {
      const r = await checkReadiness(deps);
      this.labels('postgres').set(r.postgres === 'ok' ? 1 : 0);
      this.labels('redis').set(r.redis === 'ok' ? 1 : 0);
    },
  });
}
