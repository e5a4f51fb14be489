import type { Db } from '../db/index.js';

/**
 * The price steps of a partner's minutes: one row per top-up, valid from its
 * created_at until the next top-up, carrying everything paid (`rub_total`) and
 * received (`seconds_total`) up to and including it; plus a first step from
 * -infinity with nothing received (price 0). A session is priced by the step
 * its started_at falls in, i.e. by the top-ups made at or before its start.
 *
 * Usage: `WITH price_steps AS (${priceSteps(db, partnerId)}) ...`; the cost of
 * a row is `report_cost_kopecks(charged_seconds, rub_total, seconds_total)`
 * (migrations/004_reports.sql: exact, rounded half up to the kopeck).
 */
export function priceSteps(db: Db, partnerId: string) {
  return db`
    SELECT at AS valid_from,
           lead(at, 1, 'infinity'::timestamptz) OVER w AS valid_to,
           sum(rub) OVER w AS rub_total,
           (sum(seconds) OVER w)::bigint AS seconds_total
    FROM (
      SELECT '-infinity'::timestamptz AS at, 0::bigint AS id, 0::numeric AS rub, 0::bigint AS seconds
      UNION ALL
      SELECT created_at, id, rub, seconds FROM topups WHERE partner_id = ${partnerId}
    ) steps
    WINDOW w AS (ORDER BY at, id ROWS UNBOUNDED PRECEDING)`;
}

/** Kopecks to the JSON number of rubles: k / 100 is the double nearest to the exact amount and prints as it (k < 2^53). */
export function kopecksToRub(kopecks: number): number {
  return kopecks / 100;
}
