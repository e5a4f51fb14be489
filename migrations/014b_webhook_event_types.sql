-- The event types a partner's webhook receives (PUT /webhook `enabled_events`, as Stripe's endpoints
-- have them). The default is the six types of the partner specification, so a receiver written for
-- the specification never gets a type it does not know; newer types (participant.left) are sent only
-- to a webhook that asks for them. webhook.test is always sent: it is asked for by POST /webhook/test.
-- Events of other types are still recorded (GET /events, redeliver), only not scheduled.
ALTER TABLE webhooks ADD COLUMN enabled_events text[] NOT NULL
  DEFAULT ARRAY['lesson.started', 'lesson.ended', 'participant.joined', 'balance.low', 'balance.exhausted', 'webhook.test'];

CREATE OR REPLACE FUNCTION webhook_schedule_delivery() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM webhooks
  WHERE partner_id = NEW.partner_id AND (NEW.type = 'webhook.test' OR NEW.type = ANY(enabled_events))
  FOR KEY SHARE;
  IF FOUND THEN
    INSERT INTO webhook_deliveries (event_id, partner_id, next_attempt_at)
    VALUES (NEW.id, NEW.partner_id, NEW.created_at);
  END IF;
  RETURN NULL;
END $$;
