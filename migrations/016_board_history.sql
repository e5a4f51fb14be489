-- The board's history (docs/board.md, "History and replay"; format: docs/snapshot-format.md,
-- "History"): every committed operation as the server applied it, with its place in the order,
-- its time and its author, appended in the transaction that commits it (BoardStore.commitLessons),
-- so the board at any seq is rebuilt by reducing the rows up to it. Appended only; kept as long
-- as the board itself.
CREATE TABLE board_history (
  lesson_id  text NOT NULL REFERENCES boards(lesson_id),
  -- the operation's board seq (boards.seq once it was committed)
  seq        bigint NOT NULL,
  at         timestamptz NOT NULL,
  -- the author's public id in the lesson (as presence_marks.person_id); null for a write without
  -- a person (a tool or test writing through BoardStore directly)
  person_id  text,
  role       text NOT NULL,
  -- the operation as applied (docs/snapshot-format.md, "History")
  op         jsonb NOT NULL,
  PRIMARY KEY (lesson_id, seq)
);

-- Replay links (POST /lessons/{id}/replay-links): a read-only pass to the lesson's replay page.
-- Only the token's sha256 is stored, as for entry links. Not entry links: the gateway's admission
-- never knows them, so a replay link can open no socket, send no operation and is never present.
CREATE TABLE replay_links (
  id          text PRIMARY KEY,
  lesson_id   text NOT NULL REFERENCES lessons(id),
  partner_id  text NOT NULL,
  token_hash  bytea NOT NULL UNIQUE,
  expires_at  timestamptz NOT NULL,
  created_at  timestamptz NOT NULL
);
CREATE INDEX replay_links_lesson ON replay_links (lesson_id);
