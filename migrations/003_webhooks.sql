-- Webhooks: each partner's endpoint, one delivery job per event that is to be
-- sent, and the log of every attempt. The events table itself is unchanged.

-- At most one endpoint per partner. `secret` is sealed (AES-256-GCM under
-- WEBHOOK_SECRET_KEYS, bound to the partner id): the dispatcher must sign with
-- the secret itself, so a one-way hash cannot be kept (docs/webhooks.md).
CREATE TABLE webhooks (
  partner_id  text PRIMARY KEY REFERENCES partners(id),
  url         text NOT NULL,
  secret      text NOT NULL,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL
);

-- One row per event that is to be delivered. Created by the trigger below in the
-- transaction that records the event, and only when the partner has a webhook at
-- that moment: events recorded with no webhook are never delivered later, unless
-- the partner asks for it (POST /events/{id}/redeliver).
--
-- A dispatcher claims a due row by setting claimed_by to its number while it
-- holds the session advisory lock (7243004, number: DISPATCHER_LOCK_CLASS in src/db/locks.ts). A row claimed by a
-- dispatcher whose lock is gone (process killed, connection lost) is claimable
-- again at once; claimed_at is a backstop for a half-open connection.
-- `round` grows with every redeliver / cancel, so the result of an attempt that
-- was in flight at that moment no longer changes the row's state.
CREATE TABLE webhook_deliveries (
  event_id        bigint PRIMARY KEY REFERENCES events(id),
  partner_id      text NOT NULL REFERENCES partners(id),
  state           text NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'delivered', 'undelivered', 'cancelled')),
  round           integer NOT NULL DEFAULT 1,
  attempts        integer NOT NULL DEFAULT 0,   -- attempts made in this round
  next_attempt_at timestamptz,                  -- set while pending
  claimed_by      integer,
  claimed_at      timestamptz,
  last_attempt_at timestamptz,
  delivered_at    timestamptz
)
-- A queue table: each row is updated a few times, then left alone. Free room on
-- each page keeps claim updates HOT; eager vacuum keeps the due index small.
WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, event_id) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_partner_pending ON webhook_deliveries (partner_id) WHERE state = 'pending';

-- The delivery log shown by GET /webhook/deliveries: one row per attempt.
CREATE TABLE webhook_attempts (
  id            bigserial PRIMARY KEY,
  event_id      bigint NOT NULL REFERENCES events(id),
  partner_id    text NOT NULL REFERENCES partners(id),
  round         integer NOT NULL,
  attempt       integer NOT NULL,
  url           text NOT NULL,
  address       text,                 -- the checked IP address the request went to
  attempted_at  timestamptz NOT NULL,
  duration_ms   integer NOT NULL,
  status_code   integer,
  error         text,
  delivered     boolean NOT NULL,
  dispatcher    integer NOT NULL
);
CREATE INDEX webhook_attempts_partner ON webhook_attempts (partner_id, id);
CREATE INDEX webhook_attempts_event ON webhook_attempts (event_id, id);

-- Dispatcher numbers (the second key of their liveness advisory lock).
CREATE SEQUENCE webhook_dispatcher_seq AS integer CYCLE;

-- FOR KEY SHARE on the webhook row orders this against DELETE /webhook: either
-- the delete waits for this event's transaction and then cancels the new row,
-- or this trigger waits for the delete and schedules nothing.
CREATE FUNCTION webhook_schedule_delivery() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM webhooks WHERE partner_id = NEW.partner_id FOR KEY SHARE;
  IF FOUND THEN
    INSERT INTO webhook_deliveries (event_id, partner_id, next_attempt_at)
    VALUES (NEW.id, NEW.partner_id, NEW.created_at);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER events_schedule_webhook_delivery
  AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION webhook_schedule_delivery();
