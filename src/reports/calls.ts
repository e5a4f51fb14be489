import type { Sql } from '../db/index.js';
import type { LessonMode } from '../domain/lessons.js';
import { resolveReportPeriod, type Period } from './period.js';

export interface CallItem {
  id: number;
  lesson_id: string;
  title: string;
  external_id: string | null;
  mode: LessonMode;
  started_at: Date;
  ended_at: Date | null;
  seconds: number;
  charged_seconds: number;
  people_max: number;
  /** exact cost of this call, rounded half up to the kopeck */
  cost_kopecks: number;
}

interface CallsTotal {
  count: number;
  seconds: number;
  charged_seconds: number;
  /** sum of the items' rounded costs, so the lines add up to the total */
  cost_kopecks: number;
}

export interface CallsReport extends Period {
  total: CallsTotal;
  items: CallItem[];
}

export interface Page {
  limit: number;
  offset: number;
}

/**
 * One item per session whose start falls in the period's Moscow days, newest
 * first (started_at, then id, both descending: a stable order for paging).
 * The page and the period's totals are read in one repeatable-read snapshot,
 * so they agree even while charges land. Running sessions appear with their
 * time up to their last charge.
 */
export async function getCallsReport(
  sql: Sql,
  partnerId: string,
  query: { from?: string; to?: string },
  page: Page,
  now: Date,
): Promise<CallsReport> {
  return sql.begin('isolation level repeatable read read only', async (tx) => {
    const period = await resolveReportPeriod(tx, query, now);
    const lo = tx`(${period.from}::date::timestamp AT TIME ZONE 'Europe/Moscow')`;
    const hi = tx`((${period.to}::date + 1)::timestamp AT TIME ZONE 'Europe/Moscow')`;
    // Paging on ids alone lets the offset be skipped in an index-only scan of
    // sessions_partner_started; only the page's rows are then fetched and priced.
    const items = await tx<CallItem[]>`
      WITH page AS (
        SELECT id FROM sessions
        WHERE partner_id = ${partnerId} AND started_at >= ${lo} AND started_at < ${hi}
        ORDER BY started_at DESC, id DESC
        LIMIT ${page.limit} OFFSET ${page.offset}
      )
      SELECT s.id, s.lesson_id, l.title, l.external_id, s.mode, s.started_at, s.ended_at,
             s.seconds, s.charged_seconds, s.people_max,
             report_cost_kopecks(s.charged_seconds, p.rub_total, p.seconds_total) AS cost_kopecks
      FROM page
      JOIN sessions s ON s.id = page.id
      JOIN lessons l ON l.id = s.lesson_id
      JOIN report_price_steps(${partnerId}) p ON s.started_at >= p.valid_from AND s.started_at < p.valid_to
      ORDER BY s.started_at DESC, s.id DESC`;
    // Totals: ended sessions from the calls_daily rollup (one row per day), plus
    // the running ones priced live (few; sessions_partner_running). The same
    // snapshot as the page, so the lines add up to the total.
    const [total] = await tx<CallsTotal[]>`
      WITH ended AS (
        SELECT coalesce(sum(calls), 0) AS count, coalesce(sum(seconds), 0) AS seconds,
               coalesce(sum(charged_seconds), 0) AS charged_seconds, coalesce(sum(cost_kopecks), 0) AS cost_kopecks
        FROM calls_daily
        WHERE partner_id = ${partnerId} AND day BETWEEN ${period.from}::date AND ${period.to}::date
      ), running AS (
        SELECT count(*) AS count, coalesce(sum(s.seconds), 0) AS seconds,
               coalesce(sum(s.charged_seconds), 0) AS charged_seconds,
               coalesce(sum(report_cost_kopecks(s.charged_seconds, p.rub_total, p.seconds_total)), 0) AS cost_kopecks
        FROM sessions s
        JOIN report_price_steps(${partnerId}) p ON s.started_at >= p.valid_from AND s.started_at < p.valid_to
        WHERE s.partner_id = ${partnerId} AND s.ended_at IS NULL AND s.started_at >= ${lo} AND s.started_at < ${hi}
      )
      SELECT (e.count + r.count)::bigint AS count, (e.seconds + r.seconds)::bigint AS seconds,
             (e.charged_seconds + r.charged_seconds)::bigint AS charged_seconds,
             (e.cost_kopecks + r.cost_kopecks)::bigint AS cost_kopecks
      FROM ended e, running r`;
    return { ...period, total, items };
  });
}
