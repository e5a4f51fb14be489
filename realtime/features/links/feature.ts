import { LINK_REVOKED_CHANNEL } from '../../../src/db/channels.js';
import { ListenedSet, type Listened } from '../../../src/db/listenedSet.js';
import type { Deps } from '../../../src/deps.js';
import { LINK_TTL_MINUTES_MAX, parseRevokedLinkNotice } from '../../../src/domain/links.js';
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
  const revoked = new ListenedSet<RevokedLink>(deps, {
    channel: LINK_REVOKED_CHANNEL,
    parse(payload, now) {
      const n = parseRevokedLinkNotice(payload);
      // the expiry is not in the notice: kept until the longest a link lives from now
      return n && { key: n.link_id, lessonId: n.lesson_id, until: now + LINK_TTL_MINUTES_MAX * 60_000 };
    },
    async read(now) {
      const rows = await deps.readSql<{ id: string; lesson_id: string; expires_at: Date }[]>`
        SELECT id, lesson_id, expires_at FROM links WHERE revoked_at IS NOT NULL AND expires_at > ${now}`;
      return rows.map((r) => ({ key: r.id, lessonId: r.lesson_id, until: r.expires_at.getTime() }));
    },
    max: REVOKED_MAX,
  });

  /** A revocation heard (notice, or read again after a reconnect): the link's sockets here close. */
  const closeSockets = ({ key: linkId, lessonId }: RevokedLink): void => {
    for (const conn of gw?.localConnections(lessonId) ?? []) if (conn.link.link_id === linkId) conn.close('forbidden');
    // sockets admitted but not present yet are closed by beforePresence
  };

  return {
    name: 'links',
    attach(gateway) {
      gw = gateway;
    },
    async start() {
      await revoked.start(closeSockets);
      // a failed first read costs nothing of the rule: every upgrade and page load reads the link's
      // revocation from Postgres (admit); this set only closes sockets and spares reads
      await revoked.known().catch((err) => log.warn({ err: (err as Error).message }, 'revoked links not read at start; read again on the next reconnect'));
    },
    async close() {
      await revoked.stop();
    },
    admit(link) {
      return link.revoked || revoked.has(link.link_id) ? revokedRefusal : undefined;
    },
    beforePresence({ conn }) {
      if (revoked.has(conn.link.link_id)) conn.close('forbidden');
    },
  };
}

/** A revoked link, by id, kept until it expires. */
interface RevokedLink extends Listened {
  lessonId: string;
}
