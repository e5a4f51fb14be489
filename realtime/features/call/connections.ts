import { z } from 'zod';
import { ClientMessages } from '../../protocol/clientMessages.js';
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

export const CALL_ID = /^[A-Za-z0-9]{12}$/;
const toConn = z.string().regex(CALL_ID).optional();

/** The signalling schemas of src/board/protocol.ts with the optional connection they are for. */
export const SignalSchemas = {
  'rtc.offer': ClientMessages['rtc.offer'].extend({ to_conn: toConn }),
  'rtc.answer': ClientMessages['rtc.answer'].extend({ to_conn: toConn }),
  'rtc.ice': ClientMessages['rtc.ice'].extend({ to_conn: toConn }),
  /** a tab that joined asks each connection of `to` to offer it a call */
  'rtc.hello': z.object({ type: z.literal('rtc.hello'), to: ClientMessages['rtc.offer'].shape.to }).strict(),
};
