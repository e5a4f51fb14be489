import { LINK_REVOKED_CHANNEL } from '../../../src/db/channels.js';
import { listenSurely } from '../../../src/db/listen.js';
import type { Deps } from '../../../src/deps.js';
import { parseRevokedLinkNotice } from '../../../src/domain/links.js';
import type { Refusal } from '../../admission/Admission.js';
import type { GatewayApi, GatewayFeature } from '../api.js';

/** The participant page shows its "removed" card for a 403 refusal with this code and for close 4403. */
export const revokedRefusal: Refusal = { ok: false, status: 403, code: 'removed', message: 'This link was revoked' };

/** Revoked links remembered, at most (each is forgotten after its expiry anyway: then it is refused as expired). */
const REVOKED_MAX = 100_000;

/**
 * Revoked links (DELETE /lessons/{id}/links/{link_id}). Postgres announces a
 * revocation in the statement that makes it (LINK_REVOKED_CHANNEL); every node
 * remembers the link as revoked, refuses it at the upgrade and at /embed (403,
 * the page's "removed" card), and closes its sockets opened with it here with
 * 4403. A notification missed while the LISTEN connection reconnects is made
 * good on the reconnect: the revoked links still valid are read again and
 * their sockets closed. A link's cached lookup (Admission) may predate its
 * revocation; `admit` runs after it on every upgrade, so the set decides. An
 * upgrade that passed `admit` just before the notice is caught in
 * `beforePresence`, before the person counts as present.
 */
export function linksFeature(deps: Deps): GatewayFeature {
  const log = deps.log.child({ component: 'links' });
  let gw: GatewayApi | undefined;
  let unlisten: (() => Promise<void>) | undefined;
  /** link id -> its expiry (ms) */
  const revoked = new Map<string, number>();

  const closeSockets = (lessonId: string, linkId: string): void => {
    for (const conn of gw?.localConnections(lessonId) ?? []) if (conn.link.link_id === linkId) conn.close('forbidden');
    // sockets admitted but not present yet are closed by beforePresence
  };
  const remember = (linkId: string, expiresAt: number): void => {
    revoked.set(linkId, expiresAt);
    if (revoked.size <= REVOKED_MAX) return;
    const now = deps.clock.now().getTime();
    for (const [id, exp] of revoked) if (exp <= now) revoked.delete(id);
    while (revoked.size > REVOKED_MAX) revoked.delete(revoked.keys().next().value!);
  };
  const readAgain = async (): Promise<void> => {
    const rows = await deps.readSql<{ id: string; lesson_id: string; expires_at: Date }[]>`
      SELECT id, lesson_id, expires_at FROM links WHERE revoked_at IS NOT NULL AND expires_at > ${deps.clock.now()}`;
    for (const r of rows) {
      remember(r.id, r.expires_at.getTime());
      closeSockets(r.lesson_id, r.id);
    }
  };

  return {
    name: 'links',
    attach(gateway) {
      gw = gateway;
    },
    async start() {
      const handle = await listenSurely(
        deps.sql,
        LINK_REVOKED_CHANNEL,
        (payload) => {
          const n = parseRevokedLinkNotice(payload);
          if (!n) return;
          // the expiry is not in the notice: kept until the set is pruned (a link lives 12 h at most)
          remember(n.link_id, deps.clock.now().getTime() + 12 * 3600_000);
          closeSockets(n.lesson_id, n.link_id);
        },
        () => {
          readAgain().catch((err) => log.warn({ err: (err as Error).message }, 'revoked links not read again; they close on the next reconnect'));
        },
        deps.log,
      );
      unlisten = handle.unlisten;
      // a failed first read costs nothing of the rule: every upgrade and page load reads the link's
      // revocation from Postgres (admit); this set only closes sockets and spares reads
      await readAgain().catch((err) => log.warn({ err: (err as Error).message }, 'revoked links not read at start; read again on the next reconnect'));
    },
    async close() {
      await unlisten?.();
      revoked.clear();
    },
    admit(link) {
      return link.revoked || revoked.has(link.link_id) ? revokedRefusal : undefined;
    },
    beforePresence({ conn }) {
      if (revoked.has(conn.link.link_id)) conn.close('forbidden');
    },
  };
}
