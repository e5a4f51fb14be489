-- A lesson's billed_seconds is the sum of its sessions' metered seconds, taken
-- when the lesson is read instead of kept in lessons.billed_seconds. Each
-- periodic charge updated that column for every running lesson (and locked the
-- lesson row first, so that the update could not deadlock): two of the five row
-- operations a lesson costs per flush, for a figure partners read now and then.
-- The charge now touches sessions, usage_daily and partners only
-- (src/metering/charge.ts); the partner API reads lessons through this view.
--
-- lessons.billed_seconds stays, no longer written by this release: a process of
-- the release before (a gateway during a rolling deploy) still adds to it, and
-- drops nothing. Deploy API processes before gateways (docs/operations.md), so
-- that no API process reads the column once no gateway writes it. A later
-- migration can drop it when no process of the release before runs.
CREATE VIEW lessons_billed AS
  SELECT l.id, l.partner_id, l.external_id, l.title, l.mode, l.subject_mode, l.created_at,
         l.started_at, l.ended_at, l.archived_at,
         (SELECT coalesce(sum(s.seconds), 0) FROM sessions s WHERE s.lesson_id = l.id)::bigint AS billed_seconds
  FROM lessons l;

COMMENT ON COLUMN lessons.billed_seconds IS
  'not written since migration 012 (read lessons_billed.billed_seconds: the sum of the lesson''s sessions.seconds); kept while processes of the release before may run';
