import type uWS from 'uWebSockets.js';
import type { Refusal } from '../admission/Admission.js';

/**
 * Completes a WebSocket upgrade decided after an asynchronous check (the link
 * lookup), once the upgrade handler has returned.
 *
 * Not `res.cork(() => res.upgrade(...))`, the documented way. In uWS v20.30
 * (the build pinned here) HttpResponse.cork() notices an upgrade made inside
 * its callback only if the socket moved; the upgrade reallocates it in place
 * (the WebSocket's data is smaller), so cork() goes on as if the new WebSocket
 * were still the HTTP response: it may reset its timeout to the HTTP one, and
 * it reads the HTTP state from bytes that now belong to the WebSocket. When
 * they read as "connection: close, response sent" it shuts the new socket
 * down: the participant sees 1006 right after the upgrade, before `welcome`,
 * at random (fixed upstream after this build: uWebSockets pull request 1929).
 * Reproduced on this build with a bare uWS app that upgrades from a timer:
 * a handshake saying `Connection: close` (which sets those bits for real) was
 * closed within 1 ms of `open` in 199 of 200 tries with res.cork, 0 without.
 *
 * So res.cork() must not take its corking branch around an upgrade. It does
 * not while another socket is corked: then it only runs the callback, which
 * uWS.js still counts as corked (no warning). `other` is any other open socket
 * of this node, corked for the length of the upgrade (nothing is written to
 * it). With none open, the upgrade runs uncorked and uWS.js prints its
 * "writes must be made from within a corked callback" warning for that one
 * upgrade.
 *
 * Only for handshakes that passed `isUpgradeHandshake`: uWS flags a request
 * whose Connection header is `close` to be closed after its response, and an
 * upgrade completed this way is then closed inside uWS without a close event,
 * so the next use of the socket crashes the process (a use after free; the
 * corking branch closed it properly).
 */
export function upgradeAfterCheck(res: uWS.HttpResponse, other: uWS.WebSocket<unknown> | undefined, upgrade: () => void): void {
  if (other) other.cork(() => res.cork(upgrade));
  else upgrade();
}

/**
 * RFC 6455 (4.2.1): a handshake's Connection header includes the token
 * `Upgrade` (case-insensitive). `connection` is the request's first
 * Connection header (uWS's getHeader), the one uWS decides `close` by.
 */
export function isUpgradeHandshake(connection: string): boolean {
  return connection.split(',').some((token) => token.trim().toLowerCase() === 'upgrade');
}

export const notAHandshake: Refusal = {
  ok: false,
  status: 400,
  code: 'bad_request',
  message: 'Not a WebSocket handshake: the Connection header must include Upgrade',
};
