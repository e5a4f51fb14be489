-- Usage and call-detail reports (docs/reports.md).
--
-- Two rollups serve a year of reports without touching every session:
--   usage_lesson_daily  one row per partner, Moscow day and lesson: the sum of
--                       usage_daily over the lesson's sessions, with the item's
--                       JSON head. Kept in step by a trigger on usage_daily, i.e.
--                       in the very transaction of every charge (src/metering/charge.ts).
--   calls_daily         one row per partner and Moscow day of session start:
--                       count, seconds, charged seconds and cost of the ENDED
--                       sessions. Kept in step by triggers on sessions (a session
--                       enters it when it ends) and on topups (prices change).
--                       Running sessions are few and are added live by the query.
-- Both are rebuilt from their sources by functions below (backfill, repair, bench).

-- Cost in kopecks of `charged_seconds` at the average price of the partner's
-- minutes: `rub_total` paid over `seconds_total` received (free minutes included,
-- so they lower the price). Exact integer arithmetic on numeric, rounded half up
-- to the kopeck once per call: floor((2 * charged * kopecks_paid + received) / (2 * received)).
-- No minutes received yet: nothing was paid for, the cost is 0.
-- A plain SQL function, so the planner inlines it into the report queries.
CREATE FUNCTION report_cost_kopecks(charged_seconds bigint, rub_total numeric, seconds_total bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT CASE WHEN seconds_total > 0
    THEN div(2 * charged_seconds * rub_total * 100 + seconds_total, 2 * seconds_total)::bigint
    ELSE 0 END
$$;

-- The price steps of a partner's minutes: one per top-up, valid from its
-- created_at until the next top-up, with everything paid and received up to and
-- including it; plus a first step from -infinity with nothing received (price 0).
-- A session is priced by the step its started_at falls in: the top-ups made at
-- or before its start. Inlined by the planner (a single STABLE SELECT).
CREATE FUNCTION report_price_steps(p_partner text)
RETURNS TABLE (valid_from timestamptz, valid_to timestamptz, rub_total numeric, seconds_total bigint)
LANGUAGE sql STABLE
AS $$
  SELECT at, lead(at, 1, 'infinity'::timestamptz) OVER w, sum(rub) OVER w, (sum(seconds) OVER w)::bigint
  FROM (
    SELECT '-infinity'::timestamptz AS at, 0::bigint AS id, 0::numeric AS rub, 0::bigint AS seconds
    UNION ALL
    SELECT created_at, id, rub, seconds FROM topups WHERE partner_id = p_partner
  ) steps
  WINDOW w AS (ORDER BY at, id ROWS UNBOUNDED PRECEDING)
$$;

-- The Moscow day of an instant (the zone's rules, not a fixed offset).
CREATE FUNCTION report_moscow_day(at timestamptz) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT (at AT TIME ZONE 'Europe/Moscow')::date $$;

------------------------------------------------------------------------------
-- Usage per lesson per day
------------------------------------------------------------------------------

-- A year of a busy partner is ~200,000 items (~22 MB of JSON). Each row carries
-- its item's JSON up to the numbers (`item_head`: lesson_id, external_id, mode,
-- day), written once when the row is created, so the report is one index-only
-- scan whose rows Postgres joins into JSON text: measured 2.2x faster than
-- decoding the columns and building the JSON in Node (docs/reports.md). The
-- item's keys and their order are UsageItemSchema's (src/api/presenters/usage.ts);
-- a test parses the report with that schema in strict mode. lesson_id sorts
-- bytewise ("C"), so the order of items does not depend on the database's locale.
CREATE TABLE usage_lesson_daily (
  partner_id      text NOT NULL,
  day             date NOT NULL,
  lesson_id       text COLLATE "C" NOT NULL,
  item_head       text NOT NULL,
  seconds         bigint NOT NULL,
  charged_seconds bigint NOT NULL,
  CONSTRAINT usage_lesson_daily_pkey PRIMARY KEY (partner_id, day, lesson_id)
    INCLUDE (item_head, seconds, charged_seconds)
);

-- '{"lesson_id":…,"external_id":…,"mode":…,"day":…,"seconds":' (to_json escapes).
CREATE FUNCTION report_usage_item_head(lesson_id text, external_id text, mode text, day date) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT concat('{"lesson_id":', to_json(lesson_id), ',"external_id":', coalesce(to_json(external_id)::text, 'null'),
                ',"mode":', to_json(mode), ',"day":', to_json(day), ',"seconds":')
$$;

CREATE FUNCTION reports_usage_daily_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- The charging path only ever raises seconds of an existing (session, day) row.
  IF TG_OP = 'UPDATE' AND OLD.partner_id = NEW.partner_id AND OLD.day = NEW.day AND OLD.lesson_id = NEW.lesson_id THEN
    UPDATE usage_lesson_daily
       SET seconds = seconds + (NEW.seconds - OLD.seconds),
           charged_seconds = charged_seconds + (NEW.charged_seconds - OLD.charged_seconds)
     WHERE partner_id = NEW.partner_id AND day = NEW.day AND lesson_id = NEW.lesson_id;
    RETURN NULL;
  END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE usage_lesson_daily
       SET seconds = seconds - OLD.seconds, charged_seconds = charged_seconds - OLD.charged_seconds
     WHERE partner_id = OLD.partner_id AND day = OLD.day AND lesson_id = OLD.lesson_id;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO usage_lesson_daily (partner_id, day, lesson_id, item_head, seconds, charged_seconds)
    SELECT NEW.partner_id, NEW.day, NEW.lesson_id, report_usage_item_head(l.id, l.external_id, NEW.mode, NEW.day),
           NEW.seconds, NEW.charged_seconds
      FROM lessons l WHERE l.id = NEW.lesson_id
    ON CONFLICT (partner_id, day, lesson_id) DO UPDATE
      SET seconds = usage_lesson_daily.seconds + EXCLUDED.seconds,
          charged_seconds = usage_lesson_daily.charged_seconds + EXCLUDED.charged_seconds;
  END IF;
  RETURN NULL;
END $$;

-- No API changes a lesson's external_id today; should anything do it, the
-- report follows.
CREATE FUNCTION reports_lesson_external_id_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE usage_lesson_daily SET item_head = report_usage_item_head(NEW.id, NEW.external_id, NEW.mode, day)
   WHERE partner_id = NEW.partner_id AND lesson_id = NEW.id;
  RETURN NULL;
END $$;

-- Rebuilds one partner's usage rollup from usage_daily (backfill, repair, bench).
CREATE FUNCTION reports_rebuild_usage(p_partner text) RETURNS void LANGUAGE sql AS $$
  DELETE FROM usage_lesson_daily WHERE partner_id = p_partner;
  INSERT INTO usage_lesson_daily (partner_id, day, lesson_id, item_head, seconds, charged_seconds)
  SELECT u.partner_id, u.day, u.lesson_id, report_usage_item_head(u.lesson_id, l.external_id, min(u.mode), u.day),
         sum(u.seconds), sum(u.charged_seconds)
    FROM usage_daily u JOIN lessons l ON l.id = u.lesson_id
   WHERE u.partner_id = p_partner
   GROUP BY u.partner_id, u.day, u.lesson_id, l.external_id
   ORDER BY u.day, u.lesson_id;
$$;

------------------------------------------------------------------------------
-- Calls per day of start (ended sessions)
------------------------------------------------------------------------------

CREATE TABLE calls_daily (
  partner_id      text NOT NULL,
  day             date NOT NULL,
  calls           bigint NOT NULL,
  seconds         bigint NOT NULL,
  charged_seconds bigint NOT NULL,
  cost_kopecks    bigint NOT NULL,
  PRIMARY KEY (partner_id, day)
);

-- The running sessions of a partner, which the calls totals add live. ended_at
-- is already in an index predicate (sessions_one_running), so charging updates
-- of seconds stay as cheap as before.
CREATE INDEX sessions_partner_running ON sessions (partner_id, started_at) WHERE ended_at IS NULL;

-- Cost in kopecks of one session: its charged seconds at the price of its start.
CREATE FUNCTION report_session_cost_kopecks(p_partner text, p_started_at timestamptz, p_charged bigint)
RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT report_cost_kopecks(p_charged, coalesce(sum(rub), 0), coalesce(sum(seconds), 0)::bigint)
    FROM topups WHERE partner_id = p_partner AND created_at <= p_started_at
$$;

-- A session enters calls_daily when it ends (and leaves / re-enters on any later
-- change of an ended row). The partner row lock orders this against top-ups,
-- which rebuild calls_daily (below): the cost is always taken at the prices the
-- committed top-ups give. Lock order as everywhere in metering: lesson, session,
-- partner.
CREATE FUNCTION reports_session_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.ended_at IS NOT NULL THEN
    PERFORM 1 FROM partners WHERE id = OLD.partner_id FOR NO KEY UPDATE;
    UPDATE calls_daily
       SET calls = calls - 1, seconds = seconds - OLD.seconds, charged_seconds = charged_seconds - OLD.charged_seconds,
           cost_kopecks = cost_kopecks - report_session_cost_kopecks(OLD.partner_id, OLD.started_at, OLD.charged_seconds)
     WHERE partner_id = OLD.partner_id AND day = report_moscow_day(OLD.started_at);
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.ended_at IS NOT NULL THEN
    PERFORM 1 FROM partners WHERE id = NEW.partner_id FOR NO KEY UPDATE;
    INSERT INTO calls_daily (partner_id, day, calls, seconds, charged_seconds, cost_kopecks)
    VALUES (NEW.partner_id, report_moscow_day(NEW.started_at), 1, NEW.seconds, NEW.charged_seconds,
            report_session_cost_kopecks(NEW.partner_id, NEW.started_at, NEW.charged_seconds))
    ON CONFLICT (partner_id, day) DO UPDATE
      SET calls = calls_daily.calls + 1,
          seconds = calls_daily.seconds + EXCLUDED.seconds,
          charged_seconds = calls_daily.charged_seconds + EXCLUDED.charged_seconds,
          cost_kopecks = calls_daily.cost_kopecks + EXCLUDED.cost_kopecks;
  END IF;
  RETURN NULL;
END $$;

-- Rebuilds a partner's calls_daily from the Moscow day of `p_from` on. Used when
-- a top-up changes the prices of sessions started at or after it (in practice
-- today's), and for backfill, repair and the bench.
CREATE FUNCTION reports_rebuild_calls(p_partner text, p_from timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  from_day date := report_moscow_day(p_from); -- '-infinity' stays '-infinity'
BEGIN
  DELETE FROM calls_daily WHERE partner_id = p_partner AND day >= from_day;
  INSERT INTO calls_daily (partner_id, day, calls, seconds, charged_seconds, cost_kopecks)
  SELECT p_partner, report_moscow_day(s.started_at), count(*), sum(s.seconds), sum(s.charged_seconds),
         sum(report_cost_kopecks(s.charged_seconds, p.rub_total, p.seconds_total))
    FROM report_price_steps(p_partner) p
    JOIN sessions s ON s.partner_id = p_partner
     AND s.started_at >= p.valid_from AND s.started_at < p.valid_to
   WHERE s.ended_at IS NOT NULL
     AND s.started_at >= (from_day::timestamp AT TIME ZONE 'Europe/Moscow')
   GROUP BY 2;
END $$;

CREATE FUNCTION reports_topup_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- topUp() has already locked the partner row; lock it here too for any other writer.
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    PERFORM 1 FROM partners WHERE id = OLD.partner_id FOR NO KEY UPDATE;
    PERFORM reports_rebuild_calls(OLD.partner_id, OLD.created_at);
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    PERFORM 1 FROM partners WHERE id = NEW.partner_id FOR NO KEY UPDATE;
    PERFORM reports_rebuild_calls(NEW.partner_id, NEW.created_at);
  END IF;
  RETURN NULL;
END $$;

------------------------------------------------------------------------------
-- Attach and backfill. No writes to the sources while this runs, so nothing is
-- counted twice or missed between the backfill and the first trigger call.
------------------------------------------------------------------------------

LOCK TABLE usage_daily, sessions, topups, lessons IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER reports_usage_daily_changed
  AFTER INSERT OR UPDATE OR DELETE ON usage_daily
  FOR EACH ROW EXECUTE FUNCTION reports_usage_daily_changed();

CREATE TRIGGER reports_lesson_external_id_changed
  AFTER UPDATE OF external_id ON lessons
  FOR EACH ROW WHEN (OLD.external_id IS DISTINCT FROM NEW.external_id)
  EXECUTE FUNCTION reports_lesson_external_id_changed();

-- Charges of running sessions never fire these: only rows that are or were
-- ended, and only changes that move calls_daily (not people_max, say).
CREATE TRIGGER reports_session_inserted
  AFTER INSERT ON sessions
  FOR EACH ROW WHEN (NEW.ended_at IS NOT NULL) EXECUTE FUNCTION reports_session_changed();
CREATE TRIGGER reports_session_updated
  AFTER UPDATE ON sessions
  FOR EACH ROW WHEN ((OLD.ended_at IS NOT NULL OR NEW.ended_at IS NOT NULL) AND (
    OLD.ended_at IS DISTINCT FROM NEW.ended_at OR OLD.started_at IS DISTINCT FROM NEW.started_at OR
    OLD.partner_id IS DISTINCT FROM NEW.partner_id OR OLD.seconds IS DISTINCT FROM NEW.seconds OR
    OLD.charged_seconds IS DISTINCT FROM NEW.charged_seconds))
  EXECUTE FUNCTION reports_session_changed();
CREATE TRIGGER reports_session_deleted
  AFTER DELETE ON sessions
  FOR EACH ROW WHEN (OLD.ended_at IS NOT NULL) EXECUTE FUNCTION reports_session_changed();

CREATE TRIGGER reports_topup_changed
  AFTER INSERT OR UPDATE OR DELETE ON topups
  FOR EACH ROW EXECUTE FUNCTION reports_topup_changed();

SELECT reports_rebuild_usage(id), reports_rebuild_calls(id, '-infinity') FROM partners;
