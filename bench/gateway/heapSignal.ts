import { renameSync } from 'node:fs';
import path from 'node:path';
import { writeHeapSnapshot } from 'node:v8';

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
