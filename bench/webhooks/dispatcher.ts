/**
 * One webhook dispatcher process for bench/webhooks/run.ts: the dispatcher role
 * of src/main.ts, plus trust in the bench receiver's throw-away CA (the test-only
 * `ca` runtime option). Prints `ready <number>` once it runs; stops on SIGTERM.
 */
import { readFileSync } from 'node:fs';
import { loadConfig } from '../../src/config.js';
import { createSql } from '../../src/db/index.js';
import type { Deps } from '../../src/deps.js';
import { systemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis.js';
import { startDispatcher } from '../../src/webhooks/index.js';
import { setWebhookRuntime } from '../../src/webhooks/runtime.js';

const config = loadConfig();
const deps: Deps = {
  config,
  sql: createSql(config.DATABASE_URL, { max: config.DATABASE_POOL_SIZE }),
  redis: createRedis(config.REDIS_URL, config.REDIS_KEY_PREFIX),
  clock: systemClock,
  log: createLogger(config.LOG_LEVEL),
};
setWebhookRuntime(deps, { ca: readFileSync(process.env.BENCH_CA_FILE!, 'utf8') });
const d = await startDispatcher(deps);
process.stdout.write(`ready ${d.id}\n`);
async function stop(): Promise<void> {
  await d.close();
  await deps.sql.end({ timeout: 5 });
  deps.redis.disconnect();
  process.exit(0);
}
process.on('SIGTERM', () => void stop());
// The bench holds our stdin: when it exits, for whatever reason, so do we.
process.stdin.on('end', () => void stop());
process.stdin.resume();
