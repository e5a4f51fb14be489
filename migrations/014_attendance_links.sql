-- Attendance, and links a partner can list and revoke (docs/api-decisions.md, "Attendance" and "Links").
--
-- A link can be revoked (DELETE /lessons/{id}/links/{link_id}): the gateway refuses it from then
-- on and closes the sockets opened with it. last_used_at is the latest arrival through it (the
-- gateway writes it with the arrival's presence mark).
ALTER TABLE links ADD COLUMN revoked_at timestamptz, ADD COLUMN last_used_at timestamptz;
-- what a gateway reads again when its LISTEN connection (re)connects: revoked links still valid
CREATE INDEX links_revoked_live ON links (expires_at) WHERE revoked_at IS NOT NULL;

-- Presence marks: a person became present in a lesson (joined) or stopped being present (left),
-- at the very moments presence decided and the meter used (realtime/presence: a person's first
-- connection and last connection, several tabs and nodes being one person). Attendance intervals
-- are paired from them when read (src/domain/attendance.ts), so marks written by different nodes
-- in any order give the same intervals. Appended only; keyed by the person's public id in the
-- lesson (a hash of the lesson and the keyed user hash, as lesson_removals), never the user id.
CREATE TABLE presence_marks (
  id         bigserial PRIMARY KEY,
  lesson_id  text NOT NULL REFERENCES lessons(id),
  person_id  text NOT NULL,
  joined     boolean NOT NULL,
  -- the link of an arrival; null for a departure
  link_id    text,
  at         timestamptz NOT NULL
);
-- attendance reads a lesson's marks; a departure finds the start of its interval (participant.left)
CREATE INDEX presence_marks_person ON presence_marks (lesson_id, person_id, at);
