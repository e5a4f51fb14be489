import { randomBase62 } from '../../../src/lib/crypto.js';
import type { ClientConnection } from '../../ClientConnection.js';

/**
 * The call is a mesh of connections, not of persons: one person with the
 * lesson open in two tabs (laptop and tablet) takes part twice, and each tab
 * needs its own peer connections. Every connection of a `full` lesson gets a
 * random public call id (`welcome.call_id`; never the gateway's internal
 * connection id, which names the node). Signals may name the one connection
 * they are for (`to_conn`); the gateway relays them to the person's
 * connections as before, with the sender's `from_conn`, and a page drops
 * those meant for another tab (docs/protocol.md, "Video call").
 */
const callIds = new WeakMap<ClientConnection, string>();

export function callId(conn: ClientConnection): string {
  let id = callIds.get(conn);
  if (!id) callIds.set(conn, (id = randomBase62(12)));
  return id;
}

