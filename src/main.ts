import { ConfigError, loadConfig, type Config } from './config.js';
import { migrate } from './db/migrate.js';
import { createDeps } from './deps.js';
import { createLogger } from './logger.js';
import { startApi } from './server.js';
import { startGateway } from '../realtime/index.js';
import { startDispatcher } from './webhooks/index.js';

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
// An uncaught exception or unhandled rejection still ends the process (Node's
// default, exit code 1: a supervisor restarts it); this only puts it in the log first.
process.on('uncaughtExceptionMonitor', (err, origin) => log.fatal({ err, origin }, 'fatal: the process exits'));
await migrate(config.DATABASE_URL, log.child({ component: 'migrate' }));

const deps = createDeps(config, { log });
deps.redis.on('error', (err) => log.warn({ component: 'redis', err: err.message }, 'redis error'));

const stops: (() => Promise<void>)[] = [];
if (config.ROLES.includes('api')) {
  const api = await startApi(deps);
  stops.push(api.close);
  log.info({ component: 'api', port: api.port }, 'partner API listening');
}
if (config.ROLES.includes('gateway')) {
  const gw = await startGateway(deps);
  stops.push(gw.close);
  log.info({ component: 'gateway', port: gw.port }, 'gateway listening');
}
if (config.ROLES.includes('dispatcher')) {
  const d = await startDispatcher(deps);
  stops.push(d.close);
  log.info({ component: 'dispatcher' }, 'webhook dispatcher running');
}

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'shutting down');
  for (const stop of stops.reverse()) await stop().catch((err) => log.error({ err }, 'stop failed'));
  await deps.close();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
