-- Realtime gateway: the durable side of a lesson's meter (docs/metering.md).
--
-- Redis holds the live meter of a lesson (who is present, whether metering
-- runs and since when, the accumulated milliseconds), decided atomically by Lua.
-- This table is its durable shadow, written on every transition (never per
-- message) and refreshed by the periodic flush. It is what survives a Redis
-- flush or a restart of every process:
--   * the idle sweeper ends sessions whose lesson has been empty for
--     SESSION_IDLE_SECONDS (empty_since below), on any gateway node;
--   * after Redis lost its state, the first node that needs the lesson seeds
--     Redis from this row and the running session;
--   * a running session whose meter nobody refreshed (heartbeat_at) is an
--     orphan (every process holding it died) and is ended from here.
CREATE TABLE lesson_meters (
  lesson_id     text PRIMARY KEY REFERENCES lessons(id),
  -- per-lesson transition sequence from Redis (a hybrid clock: max(seq + 1, now in ms));
  -- a write only lands if its seq is not older than the row's, so writes from
  -- several nodes arriving out of order keep the newest state
  seq           bigint NOT NULL,
  -- the running session this meter belongs to (NULL: none)
  session_id    bigint REFERENCES sessions(id),
  -- metered milliseconds of that session before running_since
  acc_ms        bigint NOT NULL DEFAULT 0,
  -- metering has run (>= 2 distinct people present) continuously since then
  running_since timestamptz,
  -- nobody has been present since then (NULL while someone is)
  empty_since   timestamptz,
  people        integer NOT NULL DEFAULT 0,
  -- last time a gateway node that serves this lesson wrote this row
  heartbeat_at  timestamptz NOT NULL
);
CREATE INDEX lesson_meters_idle ON lesson_meters (empty_since)
  WHERE empty_since IS NOT NULL AND session_id IS NOT NULL;
