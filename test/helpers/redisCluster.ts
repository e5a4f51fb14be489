import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A local Redis Cluster of three masters (no replicas): three redis-server
 * processes with `--cluster-enabled yes` on free ports, joined by
 * `redis-cli --cluster create`, ready once every node says `cluster_state:ok`.
 * Nothing on disk but each node's cluster config, in a temporary directory
 * removed by `stop`. Used by the `redis-cluster` test project (test/globalSetup.cluster.ts)
 * and the load test's `--redis-cluster`.
 */
export interface LocalRedisCluster {
  ports: number[];
  /** REDIS_CLUSTER_NODES: `127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3` */
  nodes: string;
  stop(): Promise<void>;
}

/** Free on loopback (the node's port, and its cluster bus port + 10000, must both be). */
function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

async function clusterPorts(n: number): Promise<number[]> {
  const out: number[] = [];
  while (out.length < n) {
    // below 55536 so that the bus port (+10000) exists; above the usual service ports
    const p = 20000 + Math.floor(Math.random() * 30000);
    if (out.includes(p) || out.includes(p + 10000) || out.includes(p - 10000)) continue;
    if ((await isFree(p)) && (await isFree(p + 10000))) out.push(p);
  }
  return out;
}

async function cli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 30_000 });
  return stdout;
}

export async function startRedisCluster(masters = 3): Promise<LocalRedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'redis-cluster-'));
  const ports = await clusterPorts(masters);
  const procs: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(
      procs.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.exitCode !== null || p.signalCode !== null) return resolve();
            p.once('exit', () => resolve());
            p.kill('SIGKILL');
          }),
      ),
    );
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) {
      const proc = spawn(
        'redis-server',
        [
          '--port', String(port), '--bind', '127.0.0.1',
          '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout', '5000',
          '--dir', dir, '--save', '', '--appendonly', 'no', '--daemonize', 'no',
        ],
        { stdio: 'ignore' },
      );
      procs.push(proc);
    }
    for (const port of ports) await until(async () => (await cli(port, 'PING')).trim() === 'PONG', `redis-server on ${port} did not start`);
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 60_000 });
    for (const port of ports) {
      await until(async () => (await cli(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok'), `cluster node ${port} not ok`);
    }
    return { ports, nodes: ports.map((p) => `127.0.0.1:${p}`).join(','), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function until(check: () => Promise<boolean>, message: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(message);
    await new Promise((r) => setTimeout(r, 50));
  }
}
