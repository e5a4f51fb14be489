import type { Db } from '../db/index.js';

export interface DaySlice {
  /** Moscow calendar day, YYYY-MM-DD */
  day: string;
  seconds: number;
}

/**
 * Splits `seconds` of continuous metered time ending at `end` into the Moscow
 * days they fell in, to the second. Postgres' Europe/Moscow zone decides the
 * days (not a fixed offset), so the split stays right if the zone's rules change.
 * Returned oldest first.
 */
export async function splitByMoscowDay(db: Db, end: Date, seconds: number): Promise<DaySlice[]> {
  const slices: DaySlice[] = [];
  let remaining = seconds;
  let cursor = end;
  while (remaining > 0) {
    const [row] = await db<{ day: string; midnight: Date }[]>`
      SELECT to_char((${cursor}::timestamptz - interval '1 microsecond') AT TIME ZONE 'Europe/Moscow', 'YYYY-MM-DD') AS day,
             date_trunc('day', (${cursor}::timestamptz - interval '1 microsecond') AT TIME ZONE 'Europe/Moscow')
               AT TIME ZONE 'Europe/Moscow' AS midnight`;
    const inThisDay = Math.min(remaining, Math.floor((cursor.getTime() - row.midnight.getTime()) / 1000));
    if (inThisDay > 0) slices.unshift({ day: row.day, seconds: inThisDay });
    remaining -= inThisDay;
    cursor = row.midnight;
  }
  return slices;
}
