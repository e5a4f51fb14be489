import { renameSync } from 'node:fs';
import path from 'node:path';
import { writeHeapSnapshot } from 'node:v8';

/**
 * The load test's server processes (started with --expose-gc) collect their
 * garbage on SIGWINCH: the load test reads every target's RSS settled (after a
 * full collection) before the joins and while holding the connections, so that
 * bytes per connection is what a held connection keeps, not the joins' garbage
 * V8 has not given back yet (its memory reducer does so on its own after some
 * idle seconds). Production processes never get the flag.
 */
const gc = (globalThis as { gc?: (opts?: unknown) => void }).gc;
if (gc) {
  process.on('SIGWINCH', () => {
    const before = process.memoryUsage();
    // what a heap snapshot does first: every collectable object, weak ones and all, compacted
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    if (process.env.LOADTEST_MEMORY_LOG) {
      const after = process.memoryUsage();
      const mb = (n: number) => +(n / 2 ** 20).toFixed(1);
      process.stdout.write(`${JSON.stringify({ msg: 'gc', rss: [mb(before.rss), mb(after.rss)], heapTotal: [mb(before.heapTotal), mb(after.heapTotal)], heapUsed: [mb(before.heapUsed), mb(after.heapUsed)] })}\n`);
    }
  });
}

/**
 * For the load test's --heap-snapshot only: with LOADTEST_HEAP_SNAPSHOT set to
 * a path prefix, the k-th SIGUSR2 writes a V8 heap snapshot to
 * `<prefix>.<k>.heapsnapshot` (through a temporary name, so the file appears
 * complete). Imported by the gateway entry and the relays of the load test;
 * production processes never set the variable.
 */
const prefix = process.env.LOADTEST_HEAP_SNAPSHOT;
if (prefix) {
  let k = 0;
  process.on('SIGUSR2', () => {
    const file = `${prefix}.${++k}.heapsnapshot`;
    const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tmp`);
    writeHeapSnapshot(tmp);
    renameSync(tmp, file);
  });
}
