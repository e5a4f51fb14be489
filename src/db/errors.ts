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
 * (at most READ_ATTEMPTS in all). Only for work that changes nothing (issue 13:
 * a read does not answer 500 because its backend was terminated).
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
