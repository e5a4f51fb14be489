import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** A free TCP port on loopback: the tests' helper (no vitest in it), shared like test/board/actions.ts. */
export { freePort } from '../../test/helpers/net.js';

/**
 * Starts a node entry point and waits for `readyUrl` to answer 200: compiled
 * JavaScript (`dist/...js`, what `npm start` runs) as is, TypeScript through tsx.
 */
export async function startProcess(entry: string, env: Record<string, string>, readyUrl: string): Promise<ChildProcess> {
  const args = entry.endsWith('.ts') ? ['--import', 'tsx', entry] : [entry];
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${entry} exited with ${child.exitCode}`);
    try {
      if ((await fetch(readyUrl)).status === 200) return child;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${entry} not ready`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Spawns a service whose stdout is log lines (pino JSON) and resolves with
 * its port once `ready(line)` returns one: for services that pick their own
 * port (port 0) and log it. `nodeArgs` go before the entry (a profiler, say);
 * `onLine` sees every stdout line. If the process exits first, or after
 * `timeoutMs`, the error carries its last lines.
 */
export function spawnUntilPort(
  entry: string[],
  env: Record<string, string>,
  ready: (line: string) => number | undefined,
  opts: { cwd?: string; nodeArgs?: string[]; onSpawn?: (proc: ChildProcess) => void; onLine?: (line: string) => void; timeoutMs?: number } = {},
): Promise<{ proc: ChildProcess; port: number }> {
  const loader = entry[0].endsWith('.ts') ? ['--import', 'tsx'] : [];
  const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), ...loader, ...entry], {
    cwd: opts.cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  opts.onSpawn?.(proc);
  return new Promise((resolve, reject) => {
    const lines: string[] = [];
    const fail = (why: string) => {
      proc.kill('SIGKILL');
      reject(new Error(`${entry.join(' ')} ${why}:\n${lines.join('\n')}`));
    };
    const timer = opts.timeoutMs ? setTimeout(() => fail('did not start'), opts.timeoutMs) : undefined;
    let buf = '';
    proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        lines.push(line);
        if (lines.length > 200) lines.shift();
        opts.onLine?.(line);
        const port = ready(line);
        if (port) {
          clearTimeout(timer);
          resolve({ proc, port });
        }
      }
    });
    proc.stderr!.on('data', (d: Buffer) => lines.push(d.toString()));
    proc.once('exit', (code) => fail(`exited with ${code}`));
  });
}

/** A `ready` for spawnUntilPort: the port of the log line whose msg is `msg`. */
export const logPort = (msg: string) => (line: string) => {
  try {
    const j = JSON.parse(line) as { msg?: string; port?: number };
    return j.msg === msg ? j.port : undefined;
  } catch {
    return undefined;
  }
};

/**
 * The fields of /proc/<pid>/stat from its third on (after the command's name, which may hold
 * spaces): [1] the parent's pid, [11] utime, [12] stime, [13] cutime, [14] cstime (clock ticks,
 * 100 a second). Undefined when the process is gone.
 */
export function procStat(pid: number): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** CPU seconds (user + system) a process has used so far, from /proc. */
export function cpuSeconds(pid: number): number {
  const fields = procStat(pid);
  if (!fields) throw new Error(`process ${pid} is gone`);
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The p-th percentile (0-100) of `xs`: the value at rank floor(p/100 * n), the largest for p = 100. */
export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}
