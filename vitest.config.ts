import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Files share their worker's modules (`isolate: false`): each new process would load Node's and our
 * modules again, about 1.7 s a file. A helper stops what a file started through
 * `test/helpers/fileEnd.ts`, which `test/setup.ts` runs at the end of every file.
 */
const shared = { pool: 'forks', testTimeout: 30_000, hookTimeout: 60_000, isolate: false, setupFiles: ['test/setup.ts'] } as const;

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

/**
 * Files that need a process of their own: `export` sums the resident memory of every render child
 * of its process, so the pools an earlier file left to the worker's exit would count against it.
 */
export const ISOLATED = ['test/board/export.test.ts'];

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
          exclude: [...configDefaults.exclude, 'test/**/*.cluster.test.ts', ...ALONE, ...ISOLATED],
          globalSetup: ['test/globalSetup.ts'],
        },
      },
      {
        test: { ...shared, ...together, isolate: true, name: 'isolated', include: ISOLATED, globalSetup: ['test/globalSetup.ts'] },
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
        test: { ...shared, isolate: true, maxWorkers: 1, sequence: { groupOrder: 1 }, name: 'alone', include: ALONE, globalSetup: ['test/globalSetup.ts'] },
      },
    ],
  },
});
