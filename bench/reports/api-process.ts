/**
 * The partner API alone in a process of its own, built like `src/main.ts`
 * builds the `api` role (same config, pool, Redis, app), for bench/reports.
 * Not src/main.ts itself: that also loads the gateway's code, which this
 * benchmark does not need. Prints {"port"} once it listens; SIGTERM stops it.
 */
import { loadConfig } from '../../src/config.js';
import { createSql } from '../../src/db/index.js';
import type { Deps } from '../../src/deps.js';
import { systemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis.js';
import { startApi } from '../../src/server.js';

const config = loadConfig();
const deps: Deps = {
  config,
  sql: createSql(config.DATABASE_URL, { max: config.DATABASE_POOL_SIZE }),
  redis: createRedis(config.REDIS_URL, config.REDIS_KEY_PREFIX),
  clock: systemClock,
  log: createLogger(config.LOG_LEVEL),
};
const api = await startApi(deps);
process.stdout.write(`${JSON.stringify({ port: api.port })}\n`);
process.once('SIGTERM', async () => {
  await api.close();
  await deps.sql.end({ timeout: 5 });
  deps.redis.disconnect();
  process.exit(0);
});
