import { PARTICIPANT_REMOVED_CHANNEL } from '../db/channels.js';
import type { Db } from '../db/index.js';
import { Errors } from '../errors.js';
import { personRef, publicPersonId } from './people.js';

/** `removed_by` of a removal made through the partner API (a teacher's is their public id). */
export const REMOVED_BY_PARTNER = 'partner';

/**
 * Records that a person was removed from a lesson (again: a later removal also
 * refuses links issued in between) and announces it to every gateway in the
 * same statement (PARTICIPANT_REMOVED_CHANNEL): each closes the person's
 * sockets and refuses their links issued at or before `at`
 * (realtime/features/teacher). The teacher's Remove and the partner API's both
 * come here.
 */
export async function recordRemoval(db: Db, lessonId: string, personId: string, by: string, at: Date): Promise<void> {
  await db`
    WITH stored AS (
      INSERT INTO lesson_removals (lesson_id, person_id, removed_at, removed_by)
      VALUES (${lessonId}, ${personId}, ${at}, ${by})
      ON CONFLICT (lesson_id, person_id) DO UPDATE SET removed_at = EXCLUDED.removed_at, removed_by = EXCLUDED.removed_by
      RETURNING lesson_id, person_id)
    SELECT pg_notify(${PARTICIPANT_REMOVED_CHANNEL}, json_build_object('lesson_id', lesson_id, 'person_id', person_id)::text) FROM stored`;
}

/**
 * The partner removes a person from a lesson, as the teacher's Remove does:
 * every link of theirs to the lesson issued until now is refused, and their
 * sockets close on every node. The person is named by the partner's reference
 * (personRef); 404 when no link of the lesson was issued to them.
 */
export async function removeParticipant(db: Db, lessonId: string, person: string, at: Date): Promise<void> {
  const rows = await db<{ user_hash: string }[]>`SELECT DISTINCT user_hash FROM links WHERE lesson_id = ${lessonId}`;
  const hash = rows.find((r) => personRef(r.user_hash) === person)?.user_hash;
  if (!hash) throw Errors.notFound('Participant');
  await recordRemoval(db, lessonId, publicPersonId(lessonId, hash), REMOVED_BY_PARTNER, at);
}
