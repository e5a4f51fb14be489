import { LINK_ISSUED_CHANNEL } from '../../src/db/channels.js';
import { listenSurely } from '../../src/db/listen.js';
import type { Deps } from '../../src/deps.js';
import { parseIssuedLinkNotice, resolveLinkTokenHashes, type ResolvedLink } from '../../src/domain/links.js';

/** Where Admission finds links: Postgres in production (postgresLinks), InMemoryLinks without a database. */
export interface LinkSource {
  /** the links of these token hashes (linkTokenHash), in order; undefined: unknown */
  resolve(hashes: Buffer[]): Promise<(ResolvedLink | undefined)[]>;
  /**
   * Hears the links issued from now on (`hash`: the token's hash in base64); `reconnected` on every
   * (re)connect, as notices may have been missed. Resolves to the way to stop listening.
   */
  listen(issued: (hash: string, link: ResolvedLink) => void, reconnected: () => void): Promise<() => Promise<void>>;
}

/** Links in Postgres: looked up on the read pool, heard by LINK_ISSUED_CHANNEL (sent only when a link commits). */
export function postgresLinks(deps: Pick<Deps, 'sql' | 'readSql' | 'log'>): LinkSource {
  return {
    resolve: (hashes) => resolveLinkTokenHashes(deps.readSql, hashes),
    listen: async (issued, reconnected) => {
      const req = await listenSurely(
        deps.sql,
        LINK_ISSUED_CHANNEL,
        (payload) => {
          const notice = parseIssuedLinkNotice(payload);
          if (notice) issued(notice.hash, notice.link);
        },
        reconnected,
        deps.log,
      );
      return req.unlisten;
    },
  };
}
