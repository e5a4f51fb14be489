-- Idempotency-Key on POST (docs/api-decisions.md, "Idempotency"): the first
-- response to a partner's key is kept for 24 h and replayed to a retry with the
-- same request; a retry with another request under the same key is refused.
-- `status` is NULL while the first request runs; `locked_until` lets a retry take
-- the key over when the process that held it died (it never answered).
CREATE TABLE idempotency_keys (
  partner_id   text NOT NULL REFERENCES partners(id),
  key          text NOT NULL,
  request_hash bytea NOT NULL,
  created_at   timestamptz NOT NULL,
  locked_until timestamptz NOT NULL,
  status       integer,
  body         text,
  PRIMARY KEY (partner_id, key)
);

-- the purge of expired keys walks this
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
