-- participant.joined is sent at most once per 6 hours per person and lesson,
-- across reconnects, tabs and gateway nodes: the last time it was sent is kept
-- here and claimed with one conditional upsert (src/metering/participants.ts).
CREATE TABLE participant_joins (
  lesson_id     text NOT NULL REFERENCES lessons(id),
  user_hash     text NOT NULL,
  last_sent_at  timestamptz NOT NULL,
  PRIMARY KEY (lesson_id, user_hash)
);
