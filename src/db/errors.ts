import { Errors } from '../errors.js';
import type { Logger } from '../logger.js';

/**
 * Failures of the connection rather than of the statement: the backend was
 * terminated (57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect
 * now), the socket closed or was refused, or postgres.js gave the connection up.
 * A statement that failed this way may not have run; one that only reads is
 * safe to run again.
 */
export const CONNECTION_LOST = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'ECONNRESET',
  '57P01',
  '57P02',
  '57P03',
]);

export function isConnectionLost(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONNECTION_LOST.has(code);
}

/**
 * How often a read is run again after connection losses. Killing backends
 * kills a pool's idle connections at once, and the client notices each only
 * when it next uses it: a retry may take another dead one, so one retry is
 * not enough; the pools hold at most a few connections per process.
 */
const READ_ATTEMPTS = 5;

/**
 * Runs a read; while its connection is lost under it, runs it again on another
 * (at most READ_ATTEMPTS in all), so a read does not answer 500 because its
 * backend was terminated. Only for work that changes nothing.
 */
export async function readAgainOnLoss<T>(read: () => Promise<T>, onRetry?: (err: Error) => void): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      if (!isConnectionLost(err) || attempt >= READ_ATTEMPTS) throw err;
      onRetry?.(err as Error);
    }
  }
}

/**
 * How long a partner API read waits for Postgres. While Postgres is down or
 * restarting, postgres.js keeps a query waiting for a connection (it retries
 * the connect with backoff and does not fail the query), so without a bound a
 * request would hang until Postgres is back. A restart's blip of a second or
 * two is absorbed; a longer outage answers 503 within this.
 */
export const READ_WAIT_MS = 5_000;

/**
 * readAgainOnLoss for the partner API (every GET route and the API-key
 * lookup): a read that still lost its connection after its attempts, or got
 * no answer within `waitMs` (READ_WAIT_MS; none for a route with a deadline
 * of its own, RouteDef.ownDeadline), is 503 `unavailable` with Retry-After,
 * not a 500 or a request left hanging: it changed nothing, and the partner may
 * simply retry. Writes are not wrapped: a write whose connection was lost may
 * have committed (its 500 is what the idempotency store keeps).
 */
export async function readOrUnavailable<T>(read: () => Promise<T>, onRetry?: (err: Error) => void, waitMs?: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const attempts = readAgainOnLoss(read, onRetry);
  try {
    if (waitMs === undefined) return await attempts;
    const gaveUp = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(Errors.databaseUnavailable()), waitMs);
    });
    return await Promise.race([attempts, gaveUp]);
  } catch (err) {
    throw isConnectionLost(err) ? Errors.databaseUnavailable() : err;
  } finally {
    clearTimeout(timer);
  }
}

/** How long a start-up step keeps trying while Postgres's connections are lost (migrations, LISTENs, the dispatcher's lock). */
export const START_RETRY_MS = 30_000;

/**
 * Runs a step of a process's start against Postgres; while its connection is
 * lost under it (Postgres restarting, its backends terminated), runs it again,
 * 250 ms later doubling to 5 s, for at most `retryMs`, with a warning each time.
 * Any other error, or a loss past the deadline, is thrown: the start fails and
 * the supervisor starts the process again. Only for steps that are safe to run
 * twice (a LISTEN, an advisory lock on a fresh connection, migrations each in
 * its own transaction).
 */
export async function retryWhileConnectionLost<T>(step: () => Promise<T>, opts: { what: string; log?: Logger; retryMs?: number }): Promise<T> {
  const deadline = Date.now() + (opts.retryMs ?? START_RETRY_MS);
  for (let delay = 250; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      return await step();
    } catch (err) {
      if (!isConnectionLost(err) || Date.now() + delay > deadline) throw err;
      opts.log?.warn({ err: (err as Error).message, code: (err as { code?: string }).code }, `${opts.what}: connection lost; retrying`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/**
 * A failure caused by what a statement wrote: bad data (SQLSTATE class 22, e.g. a value out of
 * range), a constraint (23), a limit of Postgres (54, e.g. a row too large) or a trigger's own
 * exception (P0). Running the same write again fails the same way; running it without the item that
 * caused it succeeds. Every other failure may pass: the connection, the server's resources, an
 * operator, a rollback, a lock, a database refusing connections (55000) and anything that is not an
 * answer from Postgres.
 */
export function causedByInput(err: unknown): boolean {
  const e = err as { name?: string; code?: unknown } | null;
  if (e?.name !== 'PostgresError' || typeof e.code !== 'string') return false;
  return ['22', '23', '54', 'P0'].includes(e.code.slice(0, 2));
}

/**
 * A batched write that one item cannot fail for the others: `write` runs on every item at once;
 * when that fails because of what it wrote (causedByInput), it runs on each half, and so on, until
 * the items that fail are alone. `failed` hears each group that failed for good: one item when an
 * item caused it, the whole group when the failure was transient. One guilty item among n costs
 * about 2·log2(n) more writes.
 */
export async function writeSplitting<T>(items: T[], write: (items: T[]) => Promise<void>, failed: (items: T[], err: unknown) => void | Promise<void>): Promise<void> {
  try {
    await write(items);
  } catch (err) {
    if (items.length < 2 || !causedByInput(err)) return void (await failed(items, err));
    const half = Math.ceil(items.length / 2);
    await writeSplitting(items.slice(0, half), write, failed);
    await writeSplitting(items.slice(half), write, failed);
  }
}
