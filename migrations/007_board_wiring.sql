-- Participants removed from a lesson by a teacher (docs/board.md, "Removal").
--
-- Keyed by the person's public id in the lesson (a hash of the lesson and the
-- partner's keyed user hash, the id the participant page shows), never by the
-- partner's user id. Every link of that person to that lesson issued at or
-- before `removed_at` is refused at the gateway (WebSocket upgrade and
-- /embed page) for as long as it would otherwise be valid; a link issued
-- later lets the person back in: the partner decides that.
CREATE TABLE lesson_removals (
  lesson_id   text NOT NULL REFERENCES lessons(id),
  person_id   text NOT NULL,
  removed_at  timestamptz NOT NULL,
  -- public id of the teacher who removed them
  removed_by  text NOT NULL,
  PRIMARY KEY (lesson_id, person_id)
);
