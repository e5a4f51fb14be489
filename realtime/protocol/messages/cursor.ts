import { z } from 'zod';
import { defineMessage } from '../registry.js';

const coordinate = z.number().min(-1e9).max(1e9);

export const CursorMessage = z.object({
  type: z.literal('cursor'),
  x: coordinate,
  y: coordinate,
  /** board page the pointer is on */
  page: z.string().min(1).max(64).optional(),
});

/**
 * A pointer position, relayed at once to everyone else in the lesson on every
 * node (not to the sender's other tabs) and never stored. Unknown fields are dropped, so the relayed frame
 * carries only what the schema allows plus the sender's public id.
 */
export const cursor = defineMessage({
  type: 'cursor',
  schema: CursorMessage,
  description:
    'Pointer position; relayed to the others in the lesson (never to the sender\'s own sockets) as {type:"cursor", from, x, y, page?}. Ephemeral; at most GATEWAY_PERSON_CURSORS_PER_SECOND (30) a second per person, the rest dropped.',
  handle({ conn, gateway, now }, msg) {
    // one budget per person on this node, whichever socket the cursor came on: ten tabs move one pointer
    const person = gateway.localPerson(conn.lessonId, conn.person.id);
    if (person && !person.cursor.take(now)) return;
    // `from` first: other nodes read it to skip the sender's sockets (Gateway.deliverFromBus)
    const frame = JSON.stringify({ type: 'cursor', from: conn.person.id, x: msg.x, y: msg.y, ...(msg.page ? { page: msg.page } : {}) });
    gateway.broadcast(conn.lessonId, frame, { except: conn, exceptPerson: conn.person.id, ephemeral: true });
  },
});
