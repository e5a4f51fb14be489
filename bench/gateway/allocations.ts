import { existsSync, readFileSync } from 'node:fs';

/** A node of a V8 sampling heap profile (`.heapprofile`, HeapProfiler.stopSampling). */
interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

/**
 * What one server allocated between its first two probes (--alloc-profile,
 * probeSignal.ts), read from its sampled heap profile: the bytes in all (each
 * sample stands for its share of every allocation, the collected ones too)
 * and by the allocating function itself (not its callers), keyed by its name,
 * file and line. Native functions and V8's own (`(root)`, `JSON.parse`,
 * string building) appear under their names, without a file. Undefined when
 * the node wrote no profile.
 */
export function readAllocations(file: string): { total: number; byFunction: Map<string, number> } | undefined {
  if (!existsSync(file)) return undefined;
  const byFunction = new Map<string, number>();
  let total = 0;
  const walk = (n: ProfileNode) => {
    const f = n.callFrame;
    const where = f.url ? ` ${f.url.replace(/^file:\/\//, '').split('/').slice(-2).join('/')}:${f.lineNumber + 1}` : '';
    const key = `${f.functionName || '(anonymous)'}${where}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + n.selfSize);
    total += n.selfSize;
    for (const c of n.children) walk(c);
  };
  walk((JSON.parse(readFileSync(file, 'utf8')) as { head: ProfileNode }).head);
  return { total, byFunction };
}

/** The functions that allocated the most over several servers' profiles, in bytes per connection held. */
export function topAllocations(profiles: { byFunction: Map<string, number> }[], held: number, count = 12): { bytes: number; where: string }[] {
  const summed = new Map<string, number>();
  for (const p of profiles) for (const [k, v] of p.byFunction) summed.set(k, (summed.get(k) ?? 0) + v);
  return [...summed]
    .sort((x, y) => y[1] - x[1])
    .slice(0, count)
    .map(([where, bytes]) => ({ bytes: held > 0 ? bytes / held : NaN, where }));
}
