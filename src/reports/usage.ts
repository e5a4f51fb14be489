import type { Sql } from '../db/index.js';
import { resolveReportPeriod, type Period } from './period.js';
import { prefetched } from './prefetch.js';

/**
 * One Moscow day of the report. `itemsJson` is the day's items, by lesson id,
 * as JSON array elements without the brackets (`{…},{…}`), in the shape of
 * UsageItemSchema (src/api/presenters/usage.ts): Postgres joins each rollup
 * row's stored JSON head with its numbers (migrations/004_reports.sql, "why").
 */
interface UsageDay {
  day: string;
  /** UTF-8 JSON, passed through untouched: decoding and re-encoding ~22 MB a year costs CPU for nothing */
  itemsJson: Buffer;
  items: number;
  seconds: number;
  charged_seconds: number;
}

export interface UsageReport extends Period {
  /** The period's days that have usage, oldest first. Read from the database while iterated; iterate once. */
  days: AsyncIterable<UsageDay>;
}

/** Days fetched per round trip: a month of a busy partner is a couple of MB. */
const DAYS_PER_BATCH = 31;

/**
 * One item per lesson per Moscow day of the period, from the usage_lesson_daily
 * rollup that every charge updates in its own transaction (migrations/004):
 * the report reconciles with the balance to the second, and a running session
 * is included up to its last charge. Lessons of any state appear (archived
 * too): their time was charged.
 *
 * The period is checked first (400 bad_range before anything is sent); the
 * days are then streamed from one statement (one snapshot), because a year of
 * a busy partner is hundreds of thousands of items.
 */
export async function getUsageReport(
  sql: Sql,
  partnerId: string,
  query: { from?: string; to?: string },
  now: Date,
): Promise<UsageReport> {
  const period = await resolveReportPeriod(sql, query, now);
  return { ...period, days: usageDays(sql, partnerId, period) };
}

async function* usageDays(sql: Sql, partnerId: string, period: Period): AsyncGenerator<UsageDay> {
  // Group and order by u.day (the date, in index order): ordering by a text
  // form of the day would hold every row back until the last one is read.
  // .raw(): every column arrives as the bytes Postgres sent (decoded below).
  const cursor = sql`
    SELECT to_char(u.day, 'YYYY-MM-DD') AS day,
           string_agg(u.item_head || u.seconds || ',"charged_seconds":' || u.charged_seconds || '}', ',') AS items_json,
           count(*) AS items,
           sum(u.seconds) AS seconds,
           sum(u.charged_seconds) AS charged_seconds
    FROM (
      SELECT day, lesson_id, item_head, seconds, charged_seconds
      FROM usage_lesson_daily
      WHERE partner_id = ${partnerId} AND day BETWEEN ${period.from}::date AND ${period.to}::date
      ORDER BY day, lesson_id
    ) u
    GROUP BY u.day
    ORDER BY u.day`.raw().cursor(DAYS_PER_BATCH);
  // The next batch is asked for while this one is sent (prefetched).
  for await (const rows of prefetched(cursor)) {
    for (const [day, itemsJson, items, seconds, charged] of rows as unknown as Buffer[][]) {
      yield { day: day.toString(), itemsJson, items: Number(items.toString()), seconds: Number(seconds.toString()), charged_seconds: Number(charged.toString()) };
    }
  }
}
