import type { Db } from '../db/index.js';
import { Errors } from '../errors.js';

/**
 * The period of a report: Moscow calendar days `YYYY-MM-DD`, both inclusive.
 * Every rule here is listed in docs/reports.md ("Period").
 */
export interface Period {
  from: string;
  to: string;
}

/** The default period is the last this many Moscow days, today included. */
const DEFAULT_PERIOD_DAYS = 30;

const DAY_MS = 86_400_000;
const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;

/**
 * A `YYYY-MM-DD` string as midnight UTC of that calendar day, or null when it
 * is not a real date (2026-02-30, 2026-13-01, 0000-01-01, 2026-1-1, ...).
 * Calendar arithmetic only: the Moscow zone never enters here, the day is a label.
 */
export function parseDay(s: string): Date | null {
  const m = DATE_RE.exec(s);
  if (!m) return null;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  // Postgres has no year 0; setUTCFullYear avoids Date.UTC's 1900 offset for years < 100.
  if (y < 1) return null;
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  return date.getUTCFullYear() === y && date.getUTCMonth() === mo - 1 && date.getUTCDate() === d ? date : null;
}

function formatDay(d: Date): string {
  return d.toISOString().slice(0, 10);
}

/**
 * The first day that is too late to end a period starting on `from`: the same
 * month and day one year later. A period that starts on 29 February may run
 * through 28 February (JS rolls the missing 29 Feb over to 1 March).
 */
function oneYearAfter(from: Date): Date {
  const d = new Date(from.getTime());
  d.setUTCFullYear(from.getUTCFullYear() + 1, from.getUTCMonth(), from.getUTCDate());
  return d;
}

/**
 * Applies the period rules to the query parameters (400 `bad_range` on any
 * breach); `today` is the current Moscow day (see `moscowToday`).
 *
 * - neither given: the last 30 Moscow days, today included;
 * - only `from`: from that day through today;
 * - only `to`: ambiguous (30 days ending then? everything up to then?), refused;
 * - not a real `YYYY-MM-DD` date, `from` after `to`, or longer than one year: refused.
 */
export function resolvePeriod(input: { from?: string; to?: string }, today: string): Period {
  if (input.from === undefined && input.to !== undefined) {
    throw Errors.badRange('to without from is ambiguous: give both from and to, or only from (through today), or neither (the last 30 days)');
  }
  if (input.from === undefined) {
    const end = parseDay(today)!;
    return { from: formatDay(new Date(end.getTime() - (DEFAULT_PERIOD_DAYS - 1) * DAY_MS)), to: today };
  }
  const from = parseDay(input.from);
  if (!from) throw Errors.badRange('from is not a valid date YYYY-MM-DD');
  const to = parseDay(input.to ?? today);
  if (!to) throw Errors.badRange('to is not a valid date YYYY-MM-DD');
  if (from > to) throw Errors.badRange(input.to === undefined ? 'from is after today' : 'from is after to');
  if (to >= oneYearAfter(from)) throw Errors.badRange('the period is longer than one year');
  return { from: formatDay(from), to: formatDay(to) };
}

/** The Moscow calendar day of `at`, by Postgres' Europe/Moscow zone (as the charges split days). */
export async function moscowToday(db: Db, at: Date): Promise<string> {
  const [row] = await db<{ today: string }[]>`
    SELECT to_char(${at}::timestamptz AT TIME ZONE 'Europe/Moscow', 'YYYY-MM-DD') AS today`;
  return row.today;
}

/** Resolves the period, asking Postgres for today only when a default needs it. */
export async function resolveReportPeriod(db: Db, input: { from?: string; to?: string }, now: Date): Promise<Period> {
  const needsToday = input.from === undefined || input.to === undefined;
  return resolvePeriod(input, needsToday ? await moscowToday(db, now) : '');
}
