import { inject } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { createSql } from '../../src/db/index.js';
import type { Deps } from '../../src/deps.js';
import { ManualClock, systemClock, type Clock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis.js';

export { ManualClock };

/** The environment of this test run (database and Redis prefix from test/globalSetup.ts). */
export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: inject('databaseUrl'),
    REDIS_URL: inject('redisUrl'),
    REDIS_KEY_PREFIX: inject('redisPrefix'),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    HOST: '127.0.0.1',
    API_PORT: '0',
    GATEWAY_PORT: '0',
    ...overrides,
  };
}

export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig(testEnv(overrides));
}

/** Real Postgres and Redis connections for a test file; call `close` in afterAll. */
export function makeDeps(opts: { env?: Record<string, string>; clock?: Clock } = {}): Deps & { close: () => Promise<void> } {
  const config = testConfig(opts.env);
  const sql = createSql(config.DATABASE_URL, { max: 5 });
  const redis = createRedis(config.REDIS_URL, config.REDIS_KEY_PREFIX);
  return {
    config,
    sql,
    redis,
    clock: opts.clock ?? systemClock,
    log: createLogger(config.LOG_LEVEL),
    close: async () => {
      await sql.end({ timeout: 5 });
      redis.disconnect();
    },
  };
}
