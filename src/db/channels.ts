/**
 * Postgres LISTEN/NOTIFY channels, named once. A notification is sent inside
 * the transaction that makes the change (pg_notify is transactional), so a
 * listener hears it only if the change commits; every listener also copes with
 * a missed one (its LISTEN connection reconnecting), because notifications
 * are hints and never the only way a change is found.
 */

/** An API key was created or revoked, or a partner suspended or resumed: API processes drop that partner's cached keys (src/api/authCache.ts). Payload: the partner id. */
export const AUTH_CHANGED_CHANNEL = 'auth_changed';

/** Events were written to the outbox (src/events/outbox.ts) or a delivery was rescheduled: dispatchers wake up (src/webhooks/dispatcher.ts). Payload: the last event id. */
export const EVENTS_CHANNEL = 'events_new';

/** A lesson was archived (DELETE /lessons/{id}): gateways drop its links and close its sockets (realtime/ArchiveListener.ts). Payload: the lesson id. */
export const LESSON_ARCHIVED_CHANNEL = 'lesson_archived';

/**
 * A link was issued: announced by its token's hash (never the token) in the
 * statement that stores it (issueLink, src/domain/links.ts), so Postgres sends
 * it only if the insert commits and always before the lesson's
 * `lesson_archived`; a gateway can then admit the link's first upgrade without
 * a lookup (realtime/admission/Admission.ts). The payload stays far below
 * Postgres's 8,000 bytes (title 255, external_id 128 and name 60 characters at
 * most).
 */
export const LINK_ISSUED_CHANNEL = 'link_issued';

/**
 * A teacher removed a participant (teacher.remove): sent in the statement that
 * stores the removal (realtime/features/teacher/removals.ts), so every gateway
 * adds the person to its cached removals of the lesson and refuses their older
 * links without a read per upgrade. Payload: `{"lesson_id","person_id"}` (the
 * public person id, never the partner's user id).
 */
export const PARTICIPANT_REMOVED_CHANNEL = 'participant_removed';

/**
 * A link was revoked (DELETE /lessons/{id}/links/{link_id}): sent in the
 * statement that revokes it (revokeLink, src/domain/links.ts), so every gateway
 * refuses the link and closes the sockets opened with it
 * (realtime/features/links). Payload: `{"lesson_id","link_id","hash"}` (the
 * token's sha256 in base64, never the token).
 */
export const LINK_REVOKED_CHANNEL = 'link_revoked';

/**
 * A lesson's title, subject mode or mode changed (PATCH /lessons/{id}): sent
 * in the statement that changes it (updateLesson, src/domain/lessons.ts);
 * every gateway updates the links it caches and tells the people of the lesson
 * there (`lesson.updated`). Payload: `{"lesson_id","title","mode","subject_mode"}`.
 */
export const LESSON_UPDATED_CHANNEL = 'lesson_updated';
