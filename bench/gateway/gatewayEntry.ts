import { loadConfig } from '../../src/config.js';
import { createSql } from '../../src/db/index.js';
import type { Deps } from '../../src/deps.js';
import { systemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis.js';
import { startGateway } from '../../realtime/index.js';

/**
 * The gateway process of the load test: src/main.ts with ROLES=gateway, except
 * that LOADTEST_FEATURES=none starts it without the lesson features (board,
 * call, chat), to measure the gateway core of issue 3 on its own.
 */
const config = loadConfig();
const log = createLogger(config.LOG_LEVEL);
const deps: Deps = {
  config,
  sql: createSql(config.DATABASE_URL, { max: config.DATABASE_POOL_SIZE }),
  redis: createRedis(config.REDIS_URL, config.REDIS_KEY_PREFIX),
  clock: systemClock,
  log,
};
const gw = await startGateway(deps, config.GATEWAY_PORT, process.env.LOADTEST_FEATURES === 'none' ? { features: [] } : {});
log.info({ component: 'gateway', port: gw.port }, 'gateway listening');
process.on('SIGTERM', () => {
  void gw.close().then(async () => {
    await deps.sql.end({ timeout: 5 });
    deps.redis.disconnect();
    process.exit(0);
  });
});
