import type { Redis } from '../../src/redis.js';
import { RateLimiter } from '../../src/lib/rateLimiter.js';
import type { ClientConnection } from '../ClientConnection.js';
import { KeyedQueue } from '../lib/KeyedQueue.js';
import { errorFrame } from '../protocol/errors.js';
import type { BoardErrorCode } from '../../src/board/errors.js';

/**
 * A budget of one message type per person, shared by every socket of the person on every node:
 * at most `burst` messages in any rolling `burst / rate` seconds (so `rate` a second on average).
 */
export interface PersonRate {
  /** messages per second, on average */
  rate: number;
  /** at most this many in any `burst / rate` seconds */
  burst: number;
  /** what the sender gets for a message over the budget (the message is dropped) */
  refuse(conn: ClientConnection, msg: any): void;
}

/**
 * Rates of message types counted per person across sockets and nodes (chat
 * lines, board operations): the same sliding-window script in Redis as the partner
 * API's limit (src/lib/rateLimiter.ts, keys `rlw:{p:<type>:<lesson>:<person>}`),
 * so ten sockets of one link on three nodes share one budget. If Redis is
 * unreachable the limiter keeps the budget in this process (fail open, per
 * node); without Redis (`redis` null: the in-memory gateway) it always does.
 *
 * A gated message waits for its decision (one Redis call while the person is
 * quiet, a reserved batch while busy); the messages of one connection are
 * decided in the order they arrived, so board operations keep their order.
 */
export class PersonRates {
  private readonly limiters = new Map<string, { rate: PersonRate; limiter: RateLimiter }>();
  /** per connection: its gated messages are decided and handled in arrival order (handle reports its own failures) */
  private readonly queues = new KeyedQueue(() => undefined);

  constructor(redis: Redis | null, rates: Record<string, PersonRate>, onRedisError?: (err: unknown) => void) {
    for (const [type, rate] of Object.entries(rates)) {
      this.limiters.set(type, { rate, limiter: new RateLimiter(redis, rate.burst, (rate.burst / rate.rate) * 1000, { onRedisError }) });
    }
  }

  gated(type: string): boolean {
    return this.limiters.has(type);
  }

  /** Runs `handle` once the person's budget for `type` allows the message, in the connection's arrival order; refuses it otherwise. */
  admit(conn: ClientConnection, type: string, msg: unknown, handle: () => void): void {
    const l = this.limiters.get(type)!;
    const key = `p:${type}:${conn.lessonId}:${conn.person.id}`;
    const decision = l.limiter.take(key);
    void this.queues.run(conn.id, async () => {
      const d = await decision.catch(() => ({ allowed: true }));
      if (conn.state !== 'present') return;
      if (d.allowed) handle();
      else l.rate.refuse(conn, msg);
    });
  }
}

/**
 * The per-person budgets of the gateway (docs/protocol.md, "Limits per person").
 * Chat: at most 10 lines in any 3⅓ s (a person typing never reaches it).
 * Board operations: at most 60 in any 3 s (20 a second on average): the page sends at most one
 * every 60 ms while drawing (about 17 a second) in chunks of 100 elements,
 * and a paste or a resync after a reconnect sends a few dozen at once.
 */
export const PERSON_RATES: Record<string, PersonRate> = {
  'chat.send': {
    rate: 3,
    burst: 10,
    refuse: (conn) => conn.send(errorFrame('rate_limited', 'at most 10 chat messages in any 3 seconds or so; wait a moment', 'chat.send')),
  },
  'board.op': {
    rate: 20,
    burst: 60,
    refuse: (conn, msg: { ref: string }) =>
      conn.send(JSON.stringify({ type: 'board.reject', ref: msg.ref, code: 'rate_limited' satisfies BoardErrorCode, message: 'too many board operations: at most 60 in any 3 s per person; try again' })),
  },
};
