import { renameSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';
import { setFlagsFromString, writeHeapSnapshot } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * The load test's probe of a server process (the gateway entry and the
 * relays import this; production processes never set the variables).
 *
 * With LOADTEST_PROBE set to a path prefix, the k-th SIGUSR2 runs a full
 * garbage collection and writes the process's memory after it to
 * `<prefix>.<k>.json` (`process.memoryUsage()`, bytes): what the load test's
 * settled bytes per connection are read from, free of the garbage and the
 * collector's timing. With LOADTEST_HEAP_SNAPSHOT=1 as well (--heap-snapshot)
 * it first writes a V8 heap snapshot to `<prefix>.<k>.heapsnapshot`. With
 * LOADTEST_ALLOC_PROFILE=1 (--alloc-profile) the first probe (before the joins)
 * starts V8's sampling heap profiler over every allocation, the collected ones
 * included, and the second (holding, after the idle hold) stops it: the
 * profile goes to `<prefix>.2.heapprofile` (DevTools opens it; the load test
 * reads the bytes allocated in between from it: allocations.ts). Each
 * file is written under a temporary name and renamed, so it appears complete.
 */
const prefix = process.env.LOADTEST_PROBE;
if (prefix) {
  // `gc` for this process only, without a node flag: the flag, then a context created after it
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const atomically = (file: string, write: (tmp: string) => void) => {
    const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tmp`);
    write(tmp);
    renameSync(tmp, file);
  };
  const sampling = process.env.LOADTEST_ALLOC_PROFILE === '1' ? new Session() : undefined;
  sampling?.connect();
  let k = 0;
  process.on('SIGUSR2', () => {
    const base = `${prefix}.${++k}`;
    // the profile first, so the probe's own work below is not in it; its file before the JSON the load test waits for
    // (an in-process session answers at once, inside post)
    if (sampling && k === 2) {
      sampling.post('HeapProfiler.stopSampling', (err, res) => {
        if (!err) atomically(`${base}.heapprofile`, (tmp) => writeFileSync(tmp, JSON.stringify(res.profile)));
      });
    }
    if (process.env.LOADTEST_HEAP_SNAPSHOT === '1') atomically(`${base}.heapsnapshot`, (tmp) => writeHeapSnapshot(tmp));
    gc();
    const memory = process.memoryUsage();
    atomically(`${base}.json`, (tmp) => writeFileSync(tmp, JSON.stringify(memory)));
    // one sample per 4 KB allocated on average, every sample kept (what the collector freed too)
    if (sampling && k === 1) sampling.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  });
}
