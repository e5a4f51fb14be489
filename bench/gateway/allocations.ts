import { existsSync, readFileSync } from 'node:fs';

/** A node of a V8 sampling heap profile (`.heapprofile`, HeapProfiler.stopSampling). */
interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

/**
 * The functions that allocated the most in the servers' sampled heap profiles
 * (--alloc-profile, probeSignal.ts), summed over the profiles: bytes per
 * connection held, by the allocating function itself (not its callers), with
 * its file and line. Native functions and V8's own (`(root)`, `JSON.parse`,
 * string building) appear under their names, without a file.
 */
export function topAllocations(files: string[], held: number, count = 12): { bytes: number; where: string }[] {
  const byFunction = new Map<string, number>();
  const walk = (n: ProfileNode) => {
    const f = n.callFrame;
    const file = f.url ? ` ${f.url.replace(/^file:\/\//, '').split('/').slice(-2).join('/')}:${f.lineNumber + 1}` : '';
    const key = `${f.functionName || '(anonymous)'}${file}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + n.selfSize);
    for (const c of n.children) walk(c);
  };
  for (const file of files) if (existsSync(file)) walk((JSON.parse(readFileSync(file, 'utf8')) as { head: ProfileNode }).head);
  return [...byFunction]
    .sort((x, y) => y[1] - x[1])
    .slice(0, count)
    .map(([where, bytes]) => ({ bytes: held > 0 ? bytes / held : NaN, where }));
}
