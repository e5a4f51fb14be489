import type { Sql } from '../db/index.js';
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

/** One Moscow day of the report: its items by lesson id, and their sums. */
export interface UsageDay {
  day: string;
  items: UsageItem[];
  seconds: number;
  charged_seconds: number;
}

export interface UsageReport extends Period {
  /** The period's days that have usage, oldest first. Read from the database while iterated; iterate once. */
  days: AsyncIterable<UsageDay>;
}

/** Days fetched per round trip: a month of a busy partner is a few hundred KB. */
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

interface DayRow {
  day: string;
  lesson_ids: string;
  external_ids: string;
  modes: string;
  seconds: string;
  charged: string;
}

async function* usageDays(sql: Sql, partnerId: string, period: Period): AsyncGenerator<UsageDay> {
  // One row per day, its columns packed into lists: a row per item would cost
  // more in the driver than everything else together. Lesson ids and modes never
  // hold a comma; external ids are arbitrary, so they travel as a JSON array.
  // All lists of a day come from the same ordered input, so they stay aligned.
  // Group and order by u.day (the date, in index order): a bare "day" would be
  // the text alias, and sorting it would hold every row back until the last.
  const cursor = sql<DayRow[]>`
    SELECT to_char(day, 'YYYY-MM-DD') AS day,
           string_agg(lesson_id, ',') AS lesson_ids,
           json_agg(external_id)::text AS external_ids,
           string_agg(mode, ',') AS modes,
           string_agg(seconds::text, ',') AS seconds,
           string_agg(charged_seconds::text, ',') AS charged
    FROM (
      SELECT day, lesson_id, external_id, mode, seconds, charged_seconds
      FROM usage_lesson_daily
      WHERE partner_id = ${partnerId} AND day BETWEEN ${period.from}::date AND ${period.to}::date
      ORDER BY day, lesson_id
    ) u
    GROUP BY u.day
    ORDER BY u.day`.cursor(DAYS_PER_BATCH);
  // Ask for the next batch before handing out this one, so Postgres works on
  // it while these days are rendered and sent.
  const batches = cursor[Symbol.asyncIterator]();
  let pending = batches.next();
  try {
    for (;;) {
      const { value: rows, done } = await pending;
      if (done) return;
      pending = batches.next();
      for (const r of rows) yield decodeDay(r);
    }
  } finally {
    // Stopped early (client gone): let the batch in flight land, then close the
    // cursor; closing while a batch is in flight would keep the connection.
    const last = await pending.catch(() => ({ done: true as const }));
    if (!last.done) await batches.return?.();
  }
}

function decodeDay(r: DayRow): UsageDay {
  const lessonIds = r.lesson_ids.split(',');
  const externalIds = JSON.parse(r.external_ids) as (string | null)[];
  const modes = r.modes.split(',') as LessonMode[];
  const seconds = r.seconds.split(',');
  const charged = r.charged.split(',');
  const day: UsageDay = { day: r.day, items: new Array(lessonIds.length), seconds: 0, charged_seconds: 0 };
  for (let i = 0; i < lessonIds.length; i++) {
    const item: UsageItem = {
      lesson_id: lessonIds[i],
      external_id: externalIds[i],
      mode: modes[i],
      day: r.day,
      seconds: Number(seconds[i]),
      charged_seconds: Number(charged[i]),
    };
    day.items[i] = item;
    day.seconds += item.seconds;
    day.charged_seconds += item.charged_seconds;
  }
  return day;
}
