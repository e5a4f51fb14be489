import type { Sql } from '../db/index.js';
import type { LessonMode } from '../domain/lessons.js';
import { resolveReportPeriod, type Period } from './period.js';
import { priceSteps } from './pricing.js';

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

export interface CallsTotal {
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
      WITH price_steps AS (${priceSteps(tx, partnerId)}),
      page AS (
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
      JOIN price_steps p ON s.started_at >= p.valid_from AND s.started_at < p.valid_to
      ORDER BY s.started_at DESC, s.id DESC`;
    // Totals per price step: each step aggregates its own slice of the period
    // from the index, so a year of sessions is priced without a join per row.
    const [total] = await tx<CallsTotal[]>`
      WITH price_steps AS (${priceSteps(tx, partnerId)})
      SELECT coalesce(sum(t.count), 0)::bigint AS count,
             coalesce(sum(t.seconds), 0)::bigint AS seconds,
             coalesce(sum(t.charged_seconds), 0)::bigint AS charged_seconds,
             coalesce(sum(t.cost_kopecks), 0)::bigint AS cost_kopecks
      FROM price_steps p
      CROSS JOIN LATERAL (
        SELECT count(*) AS count, sum(s.seconds) AS seconds, sum(s.charged_seconds) AS charged_seconds,
               sum(report_cost_kopecks(s.charged_seconds, p.rub_total, p.seconds_total)) AS cost_kopecks
        FROM sessions s
        WHERE s.partner_id = ${partnerId}
          AND s.started_at >= greatest(p.valid_from, ${lo}) AND s.started_at < least(p.valid_to, ${hi})
      ) t
      WHERE p.valid_to > ${lo} AND p.valid_from < ${hi}`;
    return { ...period, total, items };
  });
}
