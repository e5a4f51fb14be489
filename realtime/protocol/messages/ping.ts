import { z } from 'zod';
import { defineMessage } from '../registry.js';

export const PingMessage = z.object({
  type: z.literal('ping'),
  id: z.union([z.string().max(64), z.number()]).optional(),
});

/** Application-level ping (browsers cannot send WebSocket pings): answered with {type:"pong", id, t}. */
export const ping = defineMessage({
  type: 'ping',
  schema: PingMessage,
  description: 'Round-trip check; answered with {type:"pong", id, t} where t is the server time (ms).',
  handle({ conn, now }, msg) {
    conn.send(JSON.stringify({ type: 'pong', ...(msg.id !== undefined ? { id: msg.id } : {}), t: now }));
  },
});
