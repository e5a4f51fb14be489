import { configDefaults, defineConfig } from 'vitest/config';

const shared = { pool: 'forks', testTimeout: 30_000, hookTimeout: 60_000 } as const;

/**
 * The suites that run a second time against a local 3-master Redis Cluster
 * (test/helpers/redisCluster.ts, started once by test/globalSetup.cluster.ts):
 * presence and metering decided by the Lua scripts, several nodes over the bus,
 * dead nodes reaped, the per-key rate limit, the lesson bus over sharded channels; and the files named `.cluster.test.ts`,
 * what only a cluster shows. `npx vitest run --project default`
 * skips them (and the cluster).
 */
export const CLUSTER_SUITES = [
  'test/realtime/presence.test.ts',
  'test/realtime/bus.test.ts',
  'test/realtime/metering.test.ts',
  'test/realtime/multinode*.test.ts',
  'test/realtime/deadNode*.test.ts',
  'test/api/rateLimit.test.ts',
  // what only a cluster shows (skipped by the default project)
  'test/**/*.cluster.test.ts',
];

/**
 * The files that judge how quickly something else still answers while a node is under attack
 * (a render bomb; a student's flood against the teacher's pings), and the fault scenarios that
 * compare billed seconds with what their clients measured within 2 s (test/faults/chaos.test.ts:
 * beside two Chromium files, load average 12-14, the clients' own clocks ran seconds late and the
 * scenario once ran out of time). A Chromium test in the other worker would be judged with them.
 * They run after the rest, one at a time (the `alone` project).
 */
export const ALONE = ['test/board/renderBomb.test.ts', 'test/realtime/limitsAttack.test.ts', 'test/faults/chaos.test.ts'];

/**
 * Two test files at a time, whatever the core count (vitest's default is one fewer than the cores:
 * a single file at a time on the 2-core machines we run on). Most files wait on real processes,
 * sockets and timers rather than the CPU, so a second file nearly halves the suite's time; with
 * Chromium in both, two files already keep both cores busy (docs/benchmarks.md, "Test suite").
 * Each file has its own database and Redis key prefix or server. Projects of one `groupOrder` run
 * together; `alone` comes after them.
 */
const together = { maxWorkers: 2, sequence: { groupOrder: 0 } } as const;

export default defineConfig({
  test: {
    reporters: ['default', './test/reporters/summary.ts'],
    projects: [
      {
        test: {
          ...shared,
          ...together,
          name: 'default',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, 'test/**/*.cluster.test.ts', ...ALONE],
          globalSetup: ['test/globalSetup.ts'],
        },
      },
      {
        test: {
          ...shared,
          ...together,
          name: 'redis-cluster',
          include: CLUSTER_SUITES,
          globalSetup: ['test/globalSetup.ts', 'test/globalSetup.cluster.ts'],
          env: { TEST_REDIS: 'cluster' },
        },
      },
      {
        test: { ...shared, maxWorkers: 1, sequence: { groupOrder: 1 }, name: 'alone', include: ALONE, globalSetup: ['test/globalSetup.ts'] },
      },
    ],
  },
});
