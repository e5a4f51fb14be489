import { createHash } from 'node:crypto';
import { expect, it } from 'vitest';
import { SCRIPTS } from '../../realtime/presence/RedisPresence.js';
import { READ_POOL_NAME } from '../../src/deps.js';
import { startTestGateway } from './helpers/gateway.js';
import { spawnRedis } from './helpers/processes.js';

// A Redis of its own, which holds no scripts yet (as after a Redis restart),
// so the shared one used by every other test file is never flushed.
const redis = await spawnRedis();
const gw = await startTestGateway({ env: { REDIS_URL: redis.url } });

it('has its read pool open and its presence scripts loaded before it serves (the first arrivals after a start wait for neither)', async () => {
  const shas = Object.values(SCRIPTS).map((source) => createHash('sha1').update(source).digest('hex'));
  expect(await gw.deps.redis.script('EXISTS', ...shas)).toEqual(shas.map(() => 1));
  const [{ n }] = await gw.deps.sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = ${READ_POOL_NAME}`;
  expect(n).toBe(gw.deps.config.DATABASE_READ_POOL_SIZE);
});
