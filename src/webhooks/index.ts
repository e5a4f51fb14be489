import type { Deps } from '../deps.js';
import type { DispatcherMetrics } from '../metrics/dispatcher.js';
import { Dispatcher } from './dispatcher.js';

export { Dispatcher };

/**
 * The webhook dispatcher role (ROLES includes `dispatcher`). Any number of
 * dispatcher processes may run against one Postgres; they share the work.
 * `wake` and `id` are extras for tests and benchmarks.
 */
export async function startDispatcher(deps: Deps, opts: { metrics?: DispatcherMetrics } = {}): Promise<{ close: () => Promise<void>; wake: () => void; id: number }> {
  const d = new Dispatcher(deps, opts.metrics);
  await d.start();
  return { close: () => d.close(), wake: () => d.wake(), id: d.id };
}
