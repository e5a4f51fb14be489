import { readFileSync, readdirSync } from 'node:fs';

/**
 * Resident MB of this process's child processes whose command line contains `match` (Linux /proc),
 * e.g. the render pool's children. No test-runner imports: bench/ uses it too.
 */
export function childrenRssMb(match: string): number {
  let total = 0;
  for (const task of readdirSync(`/proc/${process.pid}/task`)) {
    let kids: string[] = [];
    try {
      kids = readFileSync(`/proc/${process.pid}/task/${task}/children`, 'utf8').split(' ').filter(Boolean);
    } catch {
      continue;
    }
    for (const pid of kids) {
      try {
        if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(match)) total += (Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]) * 4096) / 2 ** 20;
      } catch {
        /* exited meanwhile */
      }
    }
  }
  return total;
}
