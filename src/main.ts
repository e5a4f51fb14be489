import { ConfigError, loadConfig, type Config } from './config.js';
import { migrate } from './db/migrate.js';
import { createDeps } from './deps.js';
import { createLogger } from './logger.js';
import { sealingKeys } from './webhooks/keys.js';
import { createRegistry, readinessGauge, serveMetrics } from './metrics/registry.js';

/**
 * `npm start`: applies migrations, then runs the roles named in ROLES
 * (api, gateway, dispatcher) in this process.
 */
let config: Config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
  throw err;
}

const log = createLogger(config.LOG_LEVEL);
// A process that stores webhook secrets or idempotent replies seals them: it does not start without keys.
if (config.ROLES.includes('api') || config.ROLES.includes('dispatcher')) {
  try {
    config = { ...config, WEBHOOK_SECRET_KEYS: sealingKeys(config, log.child({ component: 'secrets' })) };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
}
// An uncaught exception or unhandled rejection still ends the process (Node's
// default, exit code 1: a supervisor restarts it); this only puts it in the log first.
process.on('uncaughtExceptionMonitor', (err, origin) => log.fatal({ err, origin }, 'fatal: the process exits'));
await migrate(config.DATABASE_URL, log.child({ component: 'migrate' }));

const deps = createDeps(config, { log });
deps.redis.on('error', (err) => log.warn({ component: 'redis', err: err.message }, 'redis error'));

// One Prometheus registry for the process (its roles' families and the default process metrics),
// served on METRICS_PORT only: never on the public API port.
const registry = config.METRICS_PORT !== undefined ? createRegistry() : undefined;
if (registry) readinessGauge(registry, deps);

// Each role's modules load only when it runs: a gateway process starts without the API's routes
// and their libraries, and the other way round.
const stops: (() => Promise<void>)[] = [];
if (config.ROLES.includes('api')) {
  const [{ startApi }, { apiMetrics }] = await Promise.all([import('./server.js'), import('./metrics/api.js')]);
  const api = await startApi(deps, config.API_PORT, { metrics: registry && apiMetrics(registry) });
  stops.push(api.close);
  log.info({ component: 'api', port: api.port }, 'partner API listening');
}
if (config.ROLES.includes('gateway')) {
  const [{ startGateway }, { applyGatewayMemoryMode }, { gatewayMetrics }] = await Promise.all([
    import('../realtime/index.js'),
    import('../realtime/memory.js'),
    import('./metrics/gateway.js'),
  ]);
  const gw = await startGateway(deps, config.GATEWAY_PORT, { metrics: registry && gatewayMetrics(registry) });
  const memory = applyGatewayMemoryMode(config, gw.gateway, log.child({ component: 'gateway' }));
  stops.push(gw.close);
  log.info({ component: 'gateway', port: gw.port, ...memory }, 'gateway listening');
}
if (config.ROLES.includes('dispatcher')) {
  const [{ startDispatcher }, { dispatcherMetrics }] = await Promise.all([import('./webhooks/index.js'), import('./metrics/dispatcher.js')]);
  const d = await startDispatcher(deps, { metrics: registry && dispatcherMetrics(registry, deps) });
  stops.push(d.close);
  log.info({ component: 'dispatcher' }, 'webhook dispatcher running');
}

let stopMetrics: (() => Promise<void>) | undefined;
if (registry && config.METRICS_PORT !== undefined) {
  const metrics = await serveMetrics(registry, deps, config.METRICS_PORT, config.HOST);
  log.info({ component: 'metrics', port: metrics.port }, 'metrics listening');
  stopMetrics = metrics.close;
}

let stopping = false;
/**
 * SIGTERM/SIGINT: each role stops accepting and finishes what it has in flight (the API its
 * requests, for at most SHUTDOWN_TIMEOUT_SECONDS; the dispatcher its deliveries, each bounded by
 * WEBHOOK_TIMEOUT_MS), then the pools close and the process exits 0. A stop that hangs past
 * both bounds ends the process with code 1.
 */
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'shutting down');
  const hardMs = (config.SHUTDOWN_TIMEOUT_SECONDS + config.DRAIN_SECONDS) * 1000 + config.WEBHOOK_TIMEOUT_MS + 10_000;
  setTimeout(() => {
    log.error({ ms: hardMs }, 'shutdown did not finish in time; exiting');
    process.exit(1);
  }, hardMs).unref();
  // Side by side: the dispatcher's deliveries and the API's requests finish together. The metrics
  // listener stops last, so a stop can be watched to its end.
  await Promise.all(stops.map((stop) => stop().catch((err) => log.error({ err }, 'stop failed'))));
  await stopMetrics?.().catch((err) => log.error({ err }, 'stop failed'));
  await deps.close();
  log.info('stopped');
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
