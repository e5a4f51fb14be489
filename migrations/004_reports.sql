-- Usage and call-detail reports (docs/reports.md).

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
