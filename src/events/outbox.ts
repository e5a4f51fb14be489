import type { Db } from '../db/index.js';

/** Every event type of the spec (docs/events.md). */
export type EventType =
  | 'lesson.started'
  | 'lesson.ended'
  | 'participant.joined'
  | 'balance.low'
  | 'balance.exhausted'
  | 'webhook.test';

export interface OutboxEvent {
  id: number;
  partner_id: string;
  type: EventType;
  data: Record<string, unknown>;
  created_at: Date;
}

/**
 * Records an event in the outbox. Call it inside the transaction that makes the
 * state change the event describes, so both commit or neither does.
 *
 * The per-partner transaction lock makes a partner's event ids commit in id
 * order: a reader paging with `after=<id>` never skips an event that commits
 * late with a smaller id. After commit, `NOTIFY events_new` wakes dispatchers.
 */
export async function recordEvent(
  tx: Db,
  partnerId: string,
  type: EventType,
  data: Record<string, unknown>,
  at: Date,
): Promise<OutboxEvent> {
  await tx`SELECT pg_advisory_xact_lock(7243002, hashtext(${partnerId}))`;
  const [row] = await tx<OutboxEvent[]>`
    INSERT INTO events (partner_id, type, data, created_at)
    VALUES (${partnerId}, ${type}, ${tx.json(data as never)}, ${at})
    RETURNING id, partner_id, type, data, created_at`;
  // NOTIFY is transactional: listeners hear it only if the transaction commits.
  await tx`SELECT pg_notify('events_new', ${String(row.id)})`;
  return row;
}
