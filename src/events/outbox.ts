import { EVENTS_CHANNEL } from '../db/channels.js';
import type { Db } from '../db/index.js';
import { OUTBOX_PARTNER_LOCK_CLASS } from '../db/locks.js';

/**
 * The event types of the partner specification: what a webhook receives unless it asks for more
 * (PUT /webhook `enabled_events`; the same list is the column's default, migrations/014b).
 */
export const SPEC_EVENT_TYPES = ['lesson.started', 'lesson.ended', 'participant.joined', 'balance.low', 'balance.exhausted', 'webhook.test'] as const;
/** Every event type (the delivered bodies: src/api/webhookEvents.ts; delivery: docs/webhooks.md). */
export const EVENT_TYPES = [...SPEC_EVENT_TYPES, 'participant.left'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface OutboxEvent {
  id: number;
  partner_id: string;
  type: EventType;
  data: Record<string, unknown>;
  created_at: Date;
}

/** An event to record (recordEvents). */
export interface NewEvent {
  partnerId: string;
  type: EventType;
  data: Record<string, unknown>;
  at: Date;
}

/**
 * Records an event in the outbox. Call it inside the transaction that makes the
 * state change the event describes, so both commit or neither does.
 */
export async function recordEvent(
  tx: Db,
  partnerId: string,
  type: EventType,
  data: Record<string, unknown>,
  at: Date,
): Promise<OutboxEvent> {
  const [row] = await recordEvents(tx, [{ partnerId, type, data, at }]);
  return row;
}

/**
 * Records events in the outbox in one insert, ids in the order given (the
 * gateway's batched session starts). Same transaction rule as recordEvent.
 *
 * The per-partner transaction lock makes a partner's event ids commit in id
 * order: a reader paging with `after=<id>` never skips an event that commits
 * late with a smaller id. The locks are taken in sorted partner order, so two
 * batches never deadlock on them. After commit, `NOTIFY events_new` wakes
 * dispatchers.
 */
export async function recordEvents(tx: Db, events: NewEvent[]): Promise<OutboxEvent[]> {
  if (events.length === 0) return [];
  const partners = [...new Set(events.map((e) => e.partnerId))].sort();
  await tx`SELECT pg_advisory_xact_lock(${OUTBOX_PARTNER_LOCK_CLASS}, hashtext(p)) FROM unnest(${partners}::text[]) WITH ORDINALITY AS x(p, n) ORDER BY n`;
  const rows = await tx<OutboxEvent[]>`
    INSERT INTO events (partner_id, type, data, created_at)
    SELECT p, t, d::jsonb, c FROM unnest(${events.map((e) => e.partnerId)}::text[], ${events.map((e) => e.type)}::text[],
                                  ${events.map((e) => JSON.stringify(e.data))}::text[], ${events.map((e) => e.at.toISOString())}::timestamptz[])
                           WITH ORDINALITY AS x(p, t, d, c, n)
    ORDER BY n
    RETURNING id, partner_id, type, data, created_at`;
  rows.sort((a, b) => a.id - b.id);
  // NOTIFY is transactional: listeners hear it only if the transaction commits.
  await tx`SELECT pg_notify(${EVENTS_CHANNEL}, ${String(rows[rows.length - 1].id)})`;
  return rows;
}
