import type { Db, Sql } from '../db/index.js';
import { Errors } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { EVENTS_CHANNEL } from '../db/channels.js';

export type DeliveryState = 'pending' | 'delivered' | 'undelivered' | 'cancelled';

/** An outbox event with the state of its delivery (null: none was scheduled). */
export interface EventWithDelivery {
  id: number;
  type: string;
  created_at: Date;
  data: Record<string, unknown>;
  delivery: {
    state: DeliveryState;
    attempts: number;
    next_attempt_at: Date | null;
    last_attempt_at: Date | null;
    delivered_at: Date | null;
  } | null;
}

interface EventRow {
  id: number;
  type: string;
  created_at: Date;
  data: Record<string, unknown>;
  state: DeliveryState | null;
  attempts: number | null;
  next_attempt_at: Date | null;
  last_attempt_at: Date | null;
  delivered_at: Date | null;
}

const toEvent = (r: EventRow): EventWithDelivery => ({
  id: r.id,
  type: r.type,
  created_at: r.created_at,
  data: r.data,
  delivery: r.state
    ? { state: r.state, attempts: r.attempts ?? 0, next_attempt_at: r.next_attempt_at, last_attempt_at: r.last_attempt_at, delivered_at: r.delivered_at }
    : null,
});

async function getEvent(db: Db, partnerId: string, id: number): Promise<EventWithDelivery | undefined> {
  const [row] = await db<EventRow[]>`
    SELECT e.id, e.type, e.created_at, e.data, d.state, d.attempts, d.next_attempt_at, d.last_attempt_at, d.delivered_at
    FROM events e LEFT JOIN webhook_deliveries d ON d.event_id = e.id
    WHERE e.id = ${id} AND e.partner_id = ${partnerId}`;
  return row && toEvent(row);
}

/**
 * GET /events: the partner's events in id order after the cursor. Ids of one
 * partner commit in id order (src/events/outbox.ts), so paging with the last id
 * seen never skips an event.
 */
export async function listEvents(db: Db, partnerId: string, opts: { after: number; limit: number }): Promise<EventWithDelivery[]> {
  const rows = await db<EventRow[]>`
    SELECT e.id, e.type, e.created_at, e.data, d.state, d.attempts, d.next_attempt_at, d.last_attempt_at, d.delivered_at
    FROM events e LEFT JOIN webhook_deliveries d ON d.event_id = e.id
    WHERE e.partner_id = ${partnerId} AND e.id > ${opts.after}
    ORDER BY e.id LIMIT ${opts.limit}`;
  return rows.map(toEvent);
}

/** Locks the partner's webhook row against DELETE for this transaction; 400 no_webhook when none. */
async function requireWebhook(tx: Db, partnerId: string): Promise<void> {
  const [w] = await tx`SELECT 1 FROM webhooks WHERE partner_id = ${partnerId} FOR KEY SHARE`;
  if (!w) throw Errors.noWebhook();
}

export const TEST_EVENT_MESSAGE = 'This is a test event. Your webhook endpoint is reachable and can verify our signature.';

/**
 * POST /webhook/test: records a `webhook.test` event, which the dispatcher
 * delivers like any other. Read back in the same transaction, as redeliver is.
 */
export async function sendTestEvent(sql: Sql, partnerId: string, at: Date): Promise<EventWithDelivery> {
  return sql.begin(async (tx) => {
    await requireWebhook(tx, partnerId);
    const id = (await recordEvent(tx, partnerId, 'webhook.test', { message: TEST_EVENT_MESSAGE }, at)).id;
    return (await getEvent(tx, partnerId, id))!;
  });
}

/**
 * POST /events/{id}/redeliver: a fresh delivery of the event, same id and body,
 * due now, with a full set of attempts (a new round). Works for any event of
 * the partner, delivered or not, also one recorded while no webhook was set.
 * An attempt of the previous round still in flight finishes first and no
 * longer changes the delivery's state. The answer is read in the same
 * transaction, so it shows the new round as this request left it (pending,
 * 0 attempts), not a first attempt the dispatcher made after the commit.
 */
export async function redeliverEvent(sql: Sql, partnerId: string, eventId: number, at: Date): Promise<EventWithDelivery> {
  return sql.begin(async (tx) => {
    const [e] = await tx`SELECT 1 FROM events WHERE id = ${eventId} AND partner_id = ${partnerId}`;
    if (!e) throw Errors.notFound('Event');
    await requireWebhook(tx, partnerId);
    await tx`
      INSERT INTO webhook_deliveries (event_id, partner_id, next_attempt_at) VALUES (${eventId}, ${partnerId}, ${at})
      ON CONFLICT (event_id) DO UPDATE SET
        state = 'pending', round = webhook_deliveries.round + 1, attempts = 0,
        next_attempt_at = EXCLUDED.next_attempt_at, delivered_at = NULL`;
    await tx`SELECT pg_notify(${EVENTS_CHANNEL}, ${String(eventId)})`;
    return (await getEvent(tx, partnerId, eventId))!;
  });
}

export interface DeliveryAttempt {
  id: number;
  event_id: number;
  attempt: number;
  url: string;
  address: string | null;
  attempted_at: Date;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  delivered: boolean;
}

/** GET /webhook/deliveries: the delivery log, oldest first after the cursor, optionally for one event. */
export async function listAttempts(
  db: Db,
  partnerId: string,
  opts: { eventId?: number; after: number; limit: number },
): Promise<DeliveryAttempt[]> {
  return db<DeliveryAttempt[]>`
    SELECT id, event_id, attempt, url, address, attempted_at, duration_ms, status_code, error, delivered
    FROM webhook_attempts
    WHERE partner_id = ${partnerId} AND id > ${opts.after}
      ${opts.eventId !== undefined ? db`AND event_id = ${opts.eventId}` : db``}
    ORDER BY id LIMIT ${opts.limit}`;
}
