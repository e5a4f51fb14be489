import { configDefaults, defineConfig } from 'vitest/config';

const shared = { pool: 'forks', testTimeout: 30_000, hookTimeout: 60_000 } as const;

/**
 * The suites that run a second time against a local 3-master Redis Cluster
 * (test/helpers/redisCluster.ts, started once by test/globalSetup.cluster.ts):
 * presence and metering decided by the Lua scripts, several nodes over the bus,
 * dead nodes reaped, the per-key rate limit; and the files named `.cluster.test.ts`,
 * what only a cluster shows. `npx vitest run --project default`
 * skips them (and the cluster).
 */
export const CLUSTER_SUITES = [
  'test/realtime/presence.test.ts',
  'test/realtime/metering.test.ts',
  'test/realtime/multinode*.test.ts',
  'test/realtime/deadNode*.test.ts',
  'test/api/rateLimit.test.ts',
  // what only a cluster shows (skipped by the default project)
  'test/**/*.cluster.test.ts',
];

export default defineConfig({
  test: {
    // Two test files at a time, whatever the core count (vitest's default is one fewer
    // than the cores: a single file at a time on the 2-core machines we run on). The
    // files mostly wait on real processes, sockets and timers, not on the CPU: the
    // suite keeps under one core busy with two at a time and takes about 300 s instead
    // of 540 s here. Each file has its own database and Redis key prefix or server.
    maxWorkers: 2,
    reporters: ['default', './test/reporters/summary.ts'],
    projects: [
      {
        test: { ...shared, name: 'default', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, 'test/**/*.cluster.test.ts'], globalSetup: ['test/globalSetup.ts'] },
      },
      {
        test: {
          ...shared,
          name: 'redis-cluster',
          include: CLUSTER_SUITES,
          globalSetup: ['test/globalSetup.ts', 'test/globalSetup.cluster.ts'],
          env: { TEST_REDIS: 'cluster' },
        },
      },
    ],
  },
});
