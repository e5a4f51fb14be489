import type { Logger } from '../logger.js';
import { retryWhileConnectionLost } from './errors.js';
import type { Sql } from './index.js';

/**
 * LISTEN on a channel for the life of a process, surviving a Postgres that
 * drops connections while the process starts.
 *
 * Once a LISTEN holds, postgres.js keeps it: when its connection closes it
 * listens again on a new one and calls `onlisten` (every listener here treats
 * that as "notifications may have been missed": it drops or reloads what they
 * keep fresh). The first LISTEN, though, is a statement like any other and
 * fails with its connection, and a start that awaited it would end the process
 * (a dispatcher starting while its backends are terminated:
 * test/faults/readiness.test.ts). It is retried here (retryWhileConnectionLost).
 *
 * A failed attempt's listener is not gone: postgres.js's own re-listen on the
 * closed connection carries it, and the retry adds another. So each attempt's
 * callbacks are guarded by the attempt: only the one that succeeded (and, after
 * `unlisten`, none) reaches `onnotify`/`onlisten`, and a notification is never
 * handled twice.
 */
export async function listenSurely(
  sql: Sql,
  channel: string,
  onnotify: (payload: string) => void,
  onlisten?: () => void,
  log?: Logger,
): Promise<{ unlisten: () => Promise<void> }> {
  let current: object | null = null;
  const handle = await retryWhileConnectionLost(
    () => {
      const attempt = {};
      current = attempt;
      return sql.listen(
        channel,
        (payload) => {
          if (current === attempt) onnotify(payload);
        },
        () => {
          if (current === attempt) onlisten?.();
        },
      );
    },
    { what: `LISTEN ${channel}`, log },
  );
  return {
    unlisten: async () => {
      current = null;
      await handle.unlisten();
    },
  };
}
