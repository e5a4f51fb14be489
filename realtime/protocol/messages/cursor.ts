import { ClientMessages } from '../clientMessages.js';
import { defineMessage } from '../registry.js';

/**
 * A pointer position, relayed at once to everyone else in the lesson on every
 * node (not to the sender's other tabs) and never stored. Unknown fields are dropped, so the relayed frame
 * carries only what the schema allows plus the sender's public id.
 */
export const cursor = defineMessage({
  type: 'cursor',
  schema: ClientMessages.cursor,
  handle({ conn, gateway, now }, msg) {
    // one budget per person on this node, whichever socket the cursor came on: ten tabs move one pointer
    const person = gateway.localPerson(conn.lessonId, conn.person.id);
    if (person && !person.cursor.take(now)) return;
    // `from` first: other nodes read it to skip the sender's sockets (Gateway.deliverFromBus)
    const frame = JSON.stringify({ type: 'cursor', from: conn.person.id, x: msg.x, y: msg.y, ...(msg.page ? { page: msg.page } : {}) });
    gateway.broadcast(conn.lessonId, frame, { except: conn, exceptPerson: conn.person.id, ephemeral: true });
  },
});
