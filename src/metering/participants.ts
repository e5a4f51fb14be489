import type { Sql } from '../db/index.js';
import { recordEvent, recordEvents } from '../events/outbox.js';
import { personRef } from '../domain/people.js';

import { PARTICIPANT_JOINED_WINDOW_MS } from './rules.js';

/** The 6-hour rule is stated in ./rules.ts; re-exported for the callers that know it from here. */
export { PARTICIPANT_JOINED_WINDOW_MS };

/**
 * A person entered a lesson. Records `participant.joined` unless one was
 * recorded for this person and lesson within the last 6 hours. The claim is one
 * conditional upsert, so reconnects, tabs and gateway nodes racing each other
 * produce one event.
 */
export async function recordParticipantJoined(
  sql: Sql,
  input: { lessonId: string; partnerId: string; externalId: string | null; userHash: string; role: string; name: string; linkId: string; at: Date },
): Promise<boolean> {
  return sql.begin(async (tx) => {
    const windowStart = new Date(input.at.getTime() - PARTICIPANT_JOINED_WINDOW_MS);
    const claimed = await tx`
      INSERT INTO participant_joins (lesson_id, user_hash, last_sent_at)
      VALUES (${input.lessonId}, ${input.userHash}, ${input.at})
      ON CONFLICT (lesson_id, user_hash) DO UPDATE SET last_sent_at = EXCLUDED.last_sent_at
      WHERE participant_joins.last_sent_at <= ${windowStart}
      RETURNING 1`;
    if (claimed.length === 0) return false;
    await recordEvent(tx, input.partnerId, 'participant.joined', {
      lesson_id: input.lessonId,
      external_id: input.externalId,
      role: input.role,
      name: input.name,
      person: personRef(input.userHash),
      link_id: input.linkId,
    }, input.at);
    return true;
  });
}

export type ParticipantJoin = Parameters<typeof recordParticipantJoined>[1];

/**
 * recordParticipantJoined for many arrivals in one transaction (the gateway
 * batches arrivals for a few milliseconds under load): the same 6-hour rule,
 * claimed by one conditional upsert for all of them, and one event per
 * claim, written by one recordEvents. Rows are claimed in key order and the
 * partners' outbox locks taken in id order (recordEvents), so concurrent
 * batches from several nodes never deadlock. Returns how many
 * events were recorded.
 */
export async function recordParticipantsJoined(sql: Sql, inputs: ParticipantJoin[]): Promise<number> {
  // one claim per person and lesson in a batch: the earliest arrival
  const byKey = new Map<string, ParticipantJoin>();
  for (const i of inputs) {
    const k = `${i.lessonId}\u0000${i.userHash}`;
    const prev = byKey.get(k);
    if (!prev || i.at < prev.at) byKey.set(k, i);
  }
  const rows = [...byKey.values()].sort((x, y) => (x.lessonId + '\u0000' + x.userHash < y.lessonId + '\u0000' + y.userHash ? -1 : 1));
  if (rows.length === 0) return 0;
  return sql.begin(async (tx) => {
    const claimed = await tx<{ lesson_id: string; user_hash: string }[]>`
      INSERT INTO participant_joins (lesson_id, user_hash, last_sent_at)
      SELECT l, u, t FROM unnest(${rows.map((r) => r.lessonId)}::text[], ${rows.map((r) => r.userHash)}::text[],
                                 ${rows.map((r) => r.at.toISOString())}::timestamptz[]) WITH ORDINALITY AS x(l, u, t, n)
      ORDER BY n
      ON CONFLICT (lesson_id, user_hash) DO UPDATE SET last_sent_at = EXCLUDED.last_sent_at
      WHERE participant_joins.last_sent_at <= EXCLUDED.last_sent_at - ${PARTICIPANT_JOINED_WINDOW_MS} * interval '1 millisecond'
      RETURNING lesson_id, user_hash`;
    const won = new Set(claimed.map((c) => `${c.lesson_id}\u0000${c.user_hash}`));
    const events = rows.filter((r) => won.has(`${r.lessonId}\u0000${r.userHash}`));
    // one outbox write for the whole batch (its partners locked in sorted order, one insert, one
    // notification) instead of three statements per event: a class arriving is a few hundred events
    await recordEvents(
      tx,
      events.map((e) => ({ partnerId: e.partnerId, type: 'participant.joined' as const, data: { lesson_id: e.lessonId, external_id: e.externalId, role: e.role, name: e.name, person: personRef(e.userHash), link_id: e.linkId }, at: e.at })),
    );
    return events.length;
  });
}
