import { ClientMessages } from '../clientMessages.js';
import { defineMessage, type MessageContext } from '../../features/api.js';

/** One budget per person on this node, whichever socket the frame came on: ten tabs move one pointer. */
const withinBudget = ({ conn, gateway, now }: MessageContext): boolean => gateway.localPerson(conn.lessonId, conn.person.id)?.cursor.take(now) ?? true;

/**
 * A pointer position, relayed at once to everyone else in the lesson on every
 * node (not to the sender's other tabs) and never stored. Unknown fields are dropped, so the relayed frame
 * carries only what the schema allows plus the sender's public id. A laser pointer is a pointer with
 * `tool: "laser"`: its trail is drawn by each receiver from these positions, within the same budget.
 */
export const cursor = defineMessage({
  type: 'cursor',
  schema: ClientMessages.cursor,
  handle(ctx, msg) {
    if (!withinBudget(ctx)) return;
    const { conn, gateway } = ctx;
    // `from` first: other nodes read it to skip the sender's sockets (Gateway.deliverFromBus)
    const frame = JSON.stringify({
      type: 'cursor',
      from: conn.person.id,
      x: msg.x,
      y: msg.y,
      ...(msg.page ? { page: msg.page } : {}),
      ...(msg.tool ? { tool: msg.tool } : {}),
      ...(msg.button ? { button: msg.button } : {}),
    });
    gateway.broadcast(conn.lessonId, frame, { except: conn, exceptPerson: conn.person.id, ephemeral: true });
  },
});

/** The pointer left the board (off the canvas, the tab hidden): relayed like `cursor`, on the same budget. */
export const cursorLeave = defineMessage({
  type: 'cursor.leave',
  schema: ClientMessages['cursor.leave'],
  handle(ctx) {
    if (!withinBudget(ctx)) return;
    const { conn, gateway } = ctx;
    gateway.broadcast(conn.lessonId, JSON.stringify({ type: 'cursor.leave', from: conn.person.id }), { except: conn, exceptPerson: conn.person.id, ephemeral: true });
  },
});
