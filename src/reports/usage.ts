import type { Db } from '../db/index.js';
import type { LessonMode } from '../domain/lessons.js';
import { resolveReportPeriod, type Period } from './period.js';

export interface UsageItem {
  lesson_id: string;
  external_id: string | null;
  mode: LessonMode;
  /** Moscow day, YYYY-MM-DD */
  day: string;
  seconds: number;
  charged_seconds: number;
}

export interface UsageReport extends Period {
  total_seconds: number;
  total_charged_seconds: number;
  items: UsageItem[];
}

/**
 * One item per lesson per Moscow day of the period, from the usage_daily rollup
 * that every charge updates in the same transaction as the balance
 * (src/metering/charge.ts): so the report reconciles with the balance to the
 * second, and a running session is included up to its last charge.
 * Ordered by day, then lesson id. Lessons of any state appear (archived too):
 * their time was charged.
 */
export async function getUsageReport(
  db: Db,
  partnerId: string,
  query: { from?: string; to?: string },
  now: Date,
): Promise<UsageReport> {
  const period = await resolveReportPeriod(db, query, now);
  const items = await db<UsageItem[]>`
    SELECT u.lesson_id, l.external_id, l.mode, to_char(u.day, 'YYYY-MM-DD') AS day,
           u.seconds, u.charged_seconds
    FROM (
      SELECT day, lesson_id, sum(seconds)::bigint AS seconds, sum(charged_seconds)::bigint AS charged_seconds
      FROM usage_daily
      WHERE partner_id = ${partnerId} AND day BETWEEN ${period.from}::date AND ${period.to}::date
      GROUP BY day, lesson_id
    ) u
    JOIN lessons l ON l.id = u.lesson_id
    ORDER BY u.day, u.lesson_id`;
  let totalSeconds = 0;
  let totalCharged = 0;
  for (const i of items) {
    totalSeconds += i.seconds;
    totalCharged += i.charged_seconds;
  }
  return { ...period, total_seconds: totalSeconds, total_charged_seconds: totalCharged, items };
}
