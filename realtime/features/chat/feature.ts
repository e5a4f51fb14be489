import { ClientMessages } from '../../protocol/clientMessages.js';
import type { Deps } from '../../../src/deps.js';
import { randomBase62 } from '../../../src/lib/crypto.js';
import { defineMessage, type GatewayFeature } from '../api.js';

/** Lines a page gets in `welcome` (a late joiner or a reconnect sees the conversation so far). */
export const CHAT_HISTORY = 50;
const HISTORY_TTL_MS = 12 * 3600_000;

/**
 * Chat beside the board (docs/protocol.md, "Chat"): a line goes to
 * everyone in the lesson on every node, the sender included, with the
 * sender's public id, name and role taken from the link (never from the
 * message). The last 50 lines are kept in Redis (`chat:{<lesson>}`, 12 hours
 * after the last line) and sent in `welcome`; chat is not part of the board
 * snapshot and is not stored in Postgres.
 */
export function chatFeature(deps: Deps): GatewayFeature {
  const log = deps.log.child({ component: 'chat' });

  const send = defineMessage({
    type: 'chat.send',
    schema: ClientMessages['chat.send'],
    description: 'A chat line; relayed to everyone in the lesson (sender included) as `chat`.',
    handle({ conn, gateway, now }, msg) {
      // the rate (10 lines in any 3⅓ s per person across sockets and nodes) is the gateway's: admission/PersonRates.ts
      const { id, name, role } = conn.person;
      const frame = JSON.stringify({ type: 'chat', id: randomBase62(12), from: { id, name, role }, text: msg.text, at: new Date(now).toISOString() });
      gateway.broadcast(conn.lessonId, frame);
      const key = `chat:{${conn.lessonId}}`;
      deps.redis
        .multi()
        .rpush(key, frame)
        .ltrim(key, -CHAT_HISTORY, -1)
        .pexpire(key, HISTORY_TTL_MS)
        .exec()
        .catch((err: Error) => log.warn({ err: err.message, lesson_id: conn.lessonId }, 'chat history not kept'));
    },
  });

  return {
    name: 'chat',
    messages: [send],
    async welcome({ conn }) {
      try {
        const lines = await deps.redis.lrange(`chat:{${conn.lessonId}}`, -CHAT_HISTORY, -1);
        return { chat: lines.map((l) => JSON.parse(l) as unknown) };
      } catch (err) {
        log.warn({ err: (err as Error).message, lesson_id: conn.lessonId }, 'chat history unavailable');
        return { chat: [] };
      }
    },
  };
}
