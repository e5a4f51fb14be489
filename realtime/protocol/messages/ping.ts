import { ClientMessages } from '../clientMessages.js';
import { defineMessage } from '../../features/api.js';

/** Application-level ping (browsers cannot send WebSocket pings): answered with {type:"pong", id, t}. */
export const ping = defineMessage({
  type: 'ping',
  schema: ClientMessages.ping,
  handle({ conn, now }, msg) {
    conn.send(JSON.stringify({ type: 'pong', ...(msg.id !== undefined ? { id: msg.id } : {}), t: now }));
  },
});
