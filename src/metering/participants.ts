import type { Sql } from '../db/index.js';
import { recordEvent } from '../events/outbox.js';

/** participant.joined goes out at most once per this window per person and lesson. */
export const PARTICIPANT_JOINED_WINDOW_MS = 6 * 3600 * 1000;

/**
 * A person entered a lesson. Records `participant.joined` unless one was
 * recorded for this person and lesson within the last 6 hours. The claim is one
 * conditional upsert, so reconnects, tabs and gateway nodes racing each other
 * produce one event.
 */
export async function recordParticipantJoined(
  sql: Sql,
  input: { lessonId: string; partnerId: string; externalId: string | null; userHash: string; role: string; name: string; at: Date },
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
    }, input.at);
    return true;
  });
}
