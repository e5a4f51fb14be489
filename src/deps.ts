import type { Config } from './config.js';
import type { Sql } from './db/index.js';
import type { Redis } from './redis.js';
import type { Clock } from './lib/clock.js';
import type { Logger } from './logger.js';

/** What every role of the service is built from; tests build the same thing. */
export interface Deps {
  config: Config;
  sql: Sql;
  redis: Redis;
  clock: Clock;
  log: Logger;
}
