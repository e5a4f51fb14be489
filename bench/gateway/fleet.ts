import type { ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { cpuSeconds, procStat } from '../lib/service.js';

/**
 * The server side of a load-test target: N processes of one kind (gateway
 * nodes sharing one Postgres and one Redis, or relay processes), and what the
 * load test reads from them: RSS and CPU from /proc, and through their probe
 * (probeSignal.ts) their memory after a full collection and heap snapshots.
 */
export type Target = 'gateway' | 'ws' | 'uws' | 'sio';

export interface Node {
  proc: ChildProcess;
  port: number;
  /** the path prefix of its probe's files, written on SIGUSR2 (probeSignal.ts) */
  probeFile: string;
}

/** The relay entry of each baseline target; the gateway is started apart (before the links exist). */
export const RELAY_ENTRY: Record<Exclude<Target, 'gateway'>, string> = {
  ws: 'bench/gateway/wsRelay.ts',
  uws: 'bench/gateway/uwsRelay.ts',
  sio: 'bench/peers/socketioRelay.ts',
};

/** Targets whose nodes share lessons through Redis (the others are single-process relays: a lesson stays on one node). */
export const HAS_BUS: Record<Target, boolean> = { gateway: true, ws: false, uws: false, sio: true };

/** RSS (MB) and CPU seconds (user + system) of a process, from /proc. */
export function usage(pid: number): { rssMb: number; cpu: number } {
  if (!existsSync(`/proc/${pid}/status`)) return { rssMb: NaN, cpu: NaN }; // it died: the figures say so, the run goes on
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  return { rssMb: rss, cpu: cpuSeconds(pid) };
}

/**
 * CPU seconds of the local Postgres server, all its processes: the postmaster (a process named
 * `postgres` whose parent is not), its live children (backends, WAL writer, checkpointer,
 * autovacuum), and the children that ended since it started (the kernel adds their CPU to the
 * parent's cutime/cstime when it reaps them), so a backend that exits between two readings is not
 * lost from the difference. Undefined when no local Postgres is found (its CPU is not ours to read).
 */
export function postgresCpu(): number | undefined {
  // every process named postgres, its stat read once
  const procs = new Map<number, string[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let comm: string;
    try {
      comm = readFileSync(`/proc/${d}/comm`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const f = comm === 'postgres\n' ? procStat(Number(d)) : undefined;
    if (f) procs.set(Number(d), f);
  }
  const master = [...procs].find(([, f]) => !procs.has(Number(f[1])));
  if (!master) return undefined;
  const [masterPid, m] = master;
  let ticks = Number(m[11]) + Number(m[12]) + Number(m[13]) + Number(m[14]);
  for (const f of procs.values()) if (Number(f[1]) === masterPid) ticks += Number(f[11]) + Number(f[12]);
  return ticks / 100;
}

/**
 * Seconds a process's main thread has spent runnable but waiting for a core (the run queue), from
 * /proc/<pid>/schedstat's second field (ns; kept by the kernel's sched_info, no schedstats switch
 * needed). NaN when the process is gone or the kernel does not keep it.
 */
export function runQueueWaitSeconds(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e9;
  } catch {
    return NaN;
  }
}

/** The machine's CPU time so far, busy (everything but idle and iowait) and in all, in core-seconds, from /proc/stat. */
export function machineCpu(): { busy: number; total: number } {
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  const total = cpu.reduce((s, x) => s + x, 0);
  return { busy: (total - cpu[3] - cpu[4]) / 100, total: total / 100 };
}

/** The soft limit on open descriptors of processes started from here (`ulimit -n`). */
export function descriptorLimit(): number {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const n = Number(line?.split(/\s+/)[3]);
  return Number.isFinite(n) ? n : 1024;
}

/**
 * Descriptors a server process needs besides its client sockets: the gateway
 * about 40 (Postgres pools, Redis, the listen socket, libuv, stdio), with a
 * margin for its accepts in flight. A process at its limit cannot accept: uWS
 * then retries the listen socket on every loop turn (busy) and libuv's
 * `net` accepts and drops, which the client sees as 1006.
 */
export const SERVER_RESERVE = 100;
/** The same for a load-generator worker (IPC, stdio, libuv). */
export const WORKER_RESERVE = 50;

/** A server's memory after a full collection (`process.memoryUsage()`, bytes), from its probe. */
export interface Memory {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

/**
 * Asks every node for its k-th probe (1, 2, ...: a full collection, then its
 * memory, and a heap snapshot first when the nodes were started with
 * --heap-snapshot) and waits for the files. A node that did not answer in
 * time (or died) gets undefined.
 */
export async function probe(nodes: Node[], k: number, timeoutMs = 300_000): Promise<{ memory: (Memory | undefined)[]; snapshots: string[] }> {
  const files = nodes.map((n) => `${n.probeFile}.${k}.json`);
  for (const n of nodes) n.proc.kill('SIGUSR2');
  const deadline = Date.now() + timeoutMs;
  while (files.some((f) => !existsSync(f)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  return {
    memory: files.map((f) => (existsSync(f) ? (JSON.parse(readFileSync(f, 'utf8')) as Memory) : undefined)),
    snapshots: nodes.map((n) => `${n.probeFile}.${k}.heapsnapshot`).filter((f) => existsSync(f)),
  };
}

/** The gateway runs from the build (gatewayEntry.ts): what of it is older than the sources (the tests' check). */
export { staleBuild } from '../../test/helpers/entry.js';
