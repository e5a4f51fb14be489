/**
 * What a test file started and must stop when it ends, run by `test/setup.ts` (a setup file, so once
 * per test file). Helpers register here rather than with an `afterAll` of their own: an `afterAll`
 * at a helper's top level is registered only by the first file of a worker that imports it (files
 * share a worker's modules, vitest.config.ts), and one inside a test body never runs.
 */
const pending: (() => Promise<void> | void)[] = [];

export function atFileEnd(stop: () => Promise<void> | void): void {
  pending.push(stop);
}

/** Runs and forgets every registered stop, newest first; one that fails does not keep the others from running. */
export async function runFileEnd(): Promise<void> {
  for (const stop of pending.splice(0).reverse()) await Promise.resolve().then(stop).catch(() => {});
}
