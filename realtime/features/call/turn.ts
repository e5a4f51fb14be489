import { createHmac } from 'node:crypto';
import type { Config } from '../../../src/config.js';

export interface IceServer {
  urls: string | string[];
  username?: string;
  credential?: string;
}

/**
 * TURN credentials of the TURN REST scheme that coturn implements
 * (`use-auth-secret` with `static-auth-secret`): the user name is
 * `<expiry unix seconds>:<person id>` and the password is
 * base64(HMAC-SHA1(secret, user name)). coturn checks the HMAC and refuses a
 * user name whose expiry has passed, so a participant's credentials are their
 * own, and stop working on their own; nothing is stored on either side.
 */
export function turnCredentials(secret: string, personId: string, expiresAt: Date): { username: string; credential: string } {
  const username = `${Math.floor(expiresAt.getTime() / 1000)}:${personId}`;
  return { username, credential: createHmac('sha1', secret).update(username).digest('base64') };
}

/**
 * The ICE servers of one participant's `welcome`: the static ICE_SERVERS
 * (STUN, or a TURN server with fixed credentials), plus, with TURN_URLS and
 * TURN_SECRET, the TURN server with credentials of this person that expire
 * with their link, and at most TURN_TTL_SECONDS from now. The call feature
 * sends fresh ones (`call.ice_servers`) at half the TTL while the socket is in
 * the lesson, so a removed person's stop working within the TTL.
 */
export function iceServersFor(
  c: Pick<Config, 'ICE_SERVERS' | 'TURN_URLS' | 'TURN_SECRET' | 'TURN_TTL_SECONDS'>,
  personId: string,
  linkExpiresAt: Date,
  now: Date,
): IceServer[] {
  if (!c.TURN_SECRET || c.TURN_URLS.length === 0) return c.ICE_SERVERS;
  const expiresAt = new Date(Math.min(linkExpiresAt.getTime(), now.getTime() + c.TURN_TTL_SECONDS * 1000));
  return [...c.ICE_SERVERS, { urls: c.TURN_URLS, ...turnCredentials(c.TURN_SECRET, personId, expiresAt) }];
}
