import { afterAll, inject } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { createDeps, type Deps } from '../../src/deps.js';
import { ManualClock, type Clock } from '../../src/lib/clock.js';

export { ManualClock };

/** The run's sealing key (tests that rotate or compare keys give their own). */
export const TEST_SEALING_KEY = Buffer.alloc(32, 7).toString('base64');

/** The environment of this test run (database and Redis prefix from test/globalSetup.ts). */
export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: inject('databaseUrl'),
    REDIS_URL: inject('redisUrl'),
    REDIS_KEY_PREFIX: inject('redisPrefix'),
    // the redis-cluster project (vitest.config.ts): the same suites on a local Redis Cluster
    REDIS_CLUSTER_NODES: process.env.TEST_REDIS === 'cluster' ? inject('redisClusterNodes') : '',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    HOST: '127.0.0.1',
    API_PORT: '0',
    GATEWAY_PORT: '0',
    // every test file calls from 127.0.0.1 and shares the run's Redis prefix: the per-address
    // limit of keyless requests would join them all (test/api/unauthenticated.test.ts sets its own)
    RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: '1000000',
    // the API and the dispatcher seal what they store and do not start without a key (src/webhooks/keys.ts)
    WEBHOOK_SECRET_KEYS: TEST_SEALING_KEY,
    ...overrides,
  };
}

export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig(testEnv(overrides));
}

/** Real Postgres and Redis connections for a test file; call `close` in afterAll. */
export function makeDeps(opts: { env?: Record<string, string>; clock?: Clock } = {}): Deps & { close: () => Promise<void> } {
  return createDeps(testConfig({ DATABASE_POOL_SIZE: '5', ...opts.env }), { clock: opts.clock });
}

/** makeDeps for a whole test file: closed in the file's afterAll. */
export function fileDeps(opts: { env?: Record<string, string>; clock?: Clock } = {}): Deps {
  const deps = makeDeps(opts);
  afterAll(() => deps.close());
  return deps;
}

/** `at(s)`: the instant s seconds after t0 (tests that write fixed times). */
export function secondsAfter(t0: Date): (s: number) => Date {
  return (s) => new Date(t0.getTime() + s * 1000);
}
