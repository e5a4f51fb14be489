/**
 * Prices live in Postgres (migrations/004_reports.sql), so the page items, the
 * calls_daily rollup and its rebuilds share one definition:
 * - `report_price_steps(partner)`: the top-up steps; a session is priced by the
 *   step its started_at falls in (all top-ups made at or before its start);
 * - `report_cost_kopecks(charged_seconds, rub_total, seconds_total)`: exact,
 *   rounded half up to the kopeck.
 * Costs travel as integer kopecks and become rubles only in the presenter.
 */

/** Kopecks to the JSON number of rubles: k / 100 is the double nearest to the exact amount and prints as it (k < 2^53). */
export function kopecksToRub(kopecks: number): number {
  return kopecks / 100;
}
