import { spawn, type ChildProcess } from 'node:child_process';
import type postgres from 'postgres';
import { testEnv } from './deps.js';
import { serviceEntry } from './entry.js';
import { atFileEnd } from './fileEnd.js';

const children = new Set<ChildProcess>();
// Every child a test file started is killed when the file ends (atFileEnd), and on exit of the worker as a backstop.
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

async function killAndWait(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  await exited;
}

export interface ServiceProcess {
  child: ChildProcess;
  output: () => string;
  stop: (signal?: NodeJS.Signals) => Promise<void>;
}

/**
 * Starts the service (`src/main.ts`, from the build when it is current: entry.ts) as a real child
 * process with the test run's database and Redis prefix, and waits until `readyUrl` answers 200. Killed after the file.
 */
export async function spawnService(env: Record<string, string>, readyUrl: string, timeoutMs = 30_000): Promise<ServiceProcess> {
  const child = spawn(process.execPath, serviceEntry(), {
    env: { ...process.env, ...testEnv(env) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  atFileEnd(() => killAndWait(child, 'SIGKILL'));
  child.once('exit', () => children.delete(child));
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const stop = (signal: NodeJS.Signals = 'SIGTERM') => killAndWait(child, signal);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`service exited early:\n${out}`);
    try {
      const res = await fetch(readyUrl);
      if (res.status === 200) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) {
      await stop('SIGKILL');
      throw new Error(`service not ready within ${timeoutMs} ms:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, output: () => out, stop };
}

/**
 * Terminates every Postgres backend of the service processes on `admin`'s database (their
 * application_name starts with `lessons`: pools, LISTEN and lock connections), not `admin`'s own;
 * returns how many.
 */
export async function terminateBackends(admin: postgres.Sql): Promise<number> {
  const [r] = await admin<{ n: number }[]>`SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE 'lessons%'`;
  return r!.n;
}
