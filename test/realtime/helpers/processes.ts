import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { testEnv } from '../../helpers/deps.js';
import { serviceEntry } from '../../helpers/entry.js';
import { atFileEnd } from '../../helpers/fileEnd.js';
import { freePort } from '../../helpers/net.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const children = new Set<ChildProcess>();
// a backstop, as test/helpers/process.ts has: a worker that ends without its file's end (a filtered or
// aborted run) must not leave gateways running (two were found still serving a test database)
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

export interface GatewayProcess {
  pid: number;
  port: number;
  /** its node id (presence's lease and connections), from its first log line */
  nodeId: string;
  logs: string[];
  proc: ChildProcess;
  wsUrl(token: string): string;
  /** SIGKILL: no cleanup at all, as in a crash */
  kill(): Promise<void>;
  /** SIGTERM: graceful shutdown */
  stop(): Promise<void>;
}

/**
 * A real gateway process: the production entry point (src/main.ts, from the
 * build when it is current: test/helpers/entry.ts) with ROLES=gateway, on a
 * free port, against the given database and Redis prefix.
 */
export async function spawnGateway(env: Record<string, string>): Promise<GatewayProcess> {
  const proc = spawn(process.execPath, serviceEntry(), {
    cwd: ROOT,
    env: { ...process.env, ...testEnv(), ...env, ROLES: 'gateway', GATEWAY_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(proc);
  const logs: string[] = [];
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  void exited.then(() => children.delete(proc));
  // waited for: the next file in this worker must not meet its connections
  atFileEnd(() => (proc.exitCode !== null || proc.signalCode !== null ? undefined : (proc.kill('SIGKILL'), exited)));
  let nodeId = '';
  const port = await new Promise<number>((resolve, reject) => {
    // 20 s and more seen at load average 40 for the build's start alone
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${logs.join('\n')}`)), 60_000);
    let buf = '';
    const onLine = (line: string) => {
      logs.push(line);
      try {
        const j = JSON.parse(line) as { msg?: string; port?: number; node?: string };
        if (j.node) nodeId ||= j.node;
        if (j.msg === 'gateway listening' && j.port) {
          clearTimeout(timer);
          resolve(j.port);
        }
      } catch {
        /* not JSON */
      }
    };
    proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        onLine(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    });
    proc.stderr!.on('data', (d: Buffer) => logs.push(d.toString()));
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}:\n${logs.join('\n')}`));
    });
  });
  return {
    pid: proc.pid!,
    port,
    nodeId,
    logs,
    proc,
    wsUrl: (token) => `ws://127.0.0.1:${port}/ws?token=${encodeURIComponent(token)}`,
    kill: async () => {
      proc.kill('SIGKILL');
      await exited;
    },
    stop: async () => {
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

/** A redis-server of our own (never the shared one), killed after the file. */
export async function spawnRedis(port?: number): Promise<{ port: number; url: string; kill(): Promise<void> }> {
  const p = port ?? (await freePort());
  const proc = spawn('redis-server', ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  children.add(proc);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  void exited.then(() => children.delete(proc));
  // waited for: the next file in this worker must not meet its connections
  atFileEnd(() => (proc.exitCode !== null || proc.signalCode !== null ? undefined : (proc.kill('SIGKILL'), exited)));
  const deadline = Date.now() + 10_000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(p, '127.0.0.1', () => {
        s.end();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) break;
    if (Date.now() > deadline) throw new Error('redis-server did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port: p,
    url: `redis://127.0.0.1:${p}/0`,
    kill: async () => {
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

