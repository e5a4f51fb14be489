import { readFileSync } from 'node:fs';

/**
 * Descriptors a gateway process keeps for itself besides its Postgres pools: Redis (the shared
 * connection and the node's own), the LISTEN connection, the listeners (gateway, API, metrics),
 * log and module files, the event loop's own (epoll, eventfd, signal pipes).
 */
export const DESCRIPTOR_RESERVE = 64;
/** The cap where the descriptor limit cannot be read (no /proc) or is unlimited. */
export const FALLBACK_MAX_CONNECTIONS = 10_000;

/**
 * The soft "Max open files" limit from the text of /proc/self/limits (the limit a process
 * actually hits: EMFILE), or undefined when the line is missing or says `unlimited`.
 */
export function softOpenFilesLimit(limits: string): number | undefined {
  const line = limits.split('\n').find((l) => l.startsWith('Max open files'));
  const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
  return soft && /^\d+$/.test(soft) ? Number(soft) : undefined;
}

export interface CapChoice {
  max: number;
  /** `setting`: GATEWAY_MAX_CONNECTIONS; `descriptors`: from the soft descriptor limit; `fallback`: no limit readable */
  from: 'setting' | 'descriptors' | 'fallback';
}

/**
 * The node's connection cap: GATEWAY_MAX_CONNECTIONS when set (> 0), else the soft descriptor
 * limit less the Postgres pools (each connection a descriptor) and DESCRIPTOR_RESERVE, at least 1;
 * FALLBACK_MAX_CONNECTIONS when `limits` (the text of /proc/self/limits) is missing or unlimited.
 */
export function chooseCap(setting: number, poolSizes: number, limits: string | undefined): CapChoice {
  if (setting > 0) return { max: setting, from: 'setting' };
  const soft = limits === undefined ? undefined : softOpenFilesLimit(limits);
  if (soft === undefined) return { max: FALLBACK_MAX_CONNECTIONS, from: 'fallback' };
  return { max: Math.max(1, soft - poolSizes - DESCRIPTOR_RESERVE), from: 'descriptors' };
}

/** /proc/self/limits, or undefined on a platform without /proc. */
export function readProcLimits(): string | undefined {
  try {
    return readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * The per-node connection cap: how many sockets this node holds, counted from the
 * moment an upgrade is taken up (before the link check: an upgrade in progress holds its
 * descriptor as an open socket does) to its refusal, its abort or the socket's close. At the cap
 * an upgrade is refused at once with 503 and Retry-After, and /readyz answers 503, so the load
 * balancer sends new arrivals elsewhere. Without it a process past its descriptor limit leaves
 * connections unaccepted in the listen backlog and uWS retries the listen socket on every loop
 * turn: a busy loop, and participants see 1006.
 */
export class ConnectionCap {
  private count = 0;

  constructor(readonly max: number) {}

  /** Takes a slot; false (nothing taken) when the node is full. */
  take(): boolean {
    if (this.count >= this.max) return false;
    this.count++;
    return true;
  }

  /** Gives back a slot taken by `take`. */
  release(): void {
    if (this.count > 0) this.count--;
  }

  get held(): number {
    return this.count;
  }

  get full(): boolean {
    return this.count >= this.max;
  }
}
