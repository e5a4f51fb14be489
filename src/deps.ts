import type { Config } from './config.js';
import { createSql, type Sql } from './db/index.js';
import { createRedis, type Redis } from './redis.js';
import { systemClock, type Clock } from './lib/clock.js';
import { createLogger, type Logger } from './logger.js';

/** What every role of the service is built from; tests build the same thing. */
export interface Deps {
  config: Config;
  sql: Sql;
  /**
   * A few connections for short point reads by primary or unique key (the
   * partner API's GET routes, lesson lookups and API key lookups; the gateway's token checks,
   * meter seeds, teacher-removal checks and board heads). Under load its connections are always busy, so
   * postgres.js pipelines several queries in one write and Postgres answers
   * them in one wake-up: fewer connections do more (docs/benchmarks.md).
   * Never for long queries (a report would hold up every read pipelined behind
   * it) or transactions: those use `sql`.
   */
  readSql: Sql;
  redis: Redis;
  clock: Clock;
  log: Logger;
}

/** The read pool's application_name in pg_stat_activity (the main pool's is `lessons`). */
export const READ_POOL_NAME = 'lessons-read';

/** The connections of one process, sized by the config; `close` ends them. */
export function createDeps(
  config: Config,
  opts: { clock?: Clock; log?: Logger } = {},
): Deps & { close: () => Promise<void> } {
  const sql = createSql(config.DATABASE_URL, { max: config.DATABASE_POOL_SIZE });
  const readSql = createSql(config.DATABASE_URL, { max: config.DATABASE_READ_POOL_SIZE, name: READ_POOL_NAME });
  const redis = createRedis(config.REDIS_URL, config.REDIS_KEY_PREFIX, config.REDIS_CLUSTER_NODES);
  return {
    config,
    sql,
    readSql,
    redis,
    clock: opts.clock ?? systemClock,
    log: opts.log ?? createLogger(config.LOG_LEVEL),
    close: async () => {
      await sql.end({ timeout: 5 });
      await readSql.end({ timeout: 5 });
      redis.disconnect();
    },
  };
}
