import { z } from 'zod';
import type { UsageReport } from '../../reports/usage.js';
import { LessonModeSchema } from '../../domain/enums.js';

export const UsageItemSchema = z
  .object({
    lesson_id: z.string(),
    external_id: z.string().nullable(),
    mode: LessonModeSchema,
    day: z.iso.date().describe('Moscow day'),
    seconds: z.number().int().describe('metered lesson time that day'),
    charged_seconds: z.number().int().describe('what that time deducted from the balance'),
  })
  .meta({ id: 'UsageItem' });

export const UsageReportSchema = z
  .object({
    from: z.iso.date().describe('first Moscow day of the applied period'),
    to: z.iso.date().describe('last Moscow day of the applied period (inclusive)'),
    items: z.array(UsageItemSchema).describe('one item per lesson per day, by day then lesson id'),
    total_seconds: z.number().int(),
    total_charged_seconds: z.number().int(),
  })
  .meta({ id: 'UsageReport' });

/**
 * The usage report as JSON text, written day by day as the days are read, so a
 * year of items (~200k, ~22 MB) never sits in memory at once. The items of a
 * day come as JSON from the rollup (src/reports/usage.ts); the totals are the
 * sums of the items sent, so they follow the items (JSON objects are unordered).
 */
export async function* renderUsage(r: UsageReport): AsyncGenerator<string | Buffer> {
  yield `{"from":"${r.from}","to":"${r.to}","items":[`;
  let totalSeconds = 0;
  let totalCharged = 0;
  let first = true;
  for await (const day of r.days) {
    if (!first) yield ',';
    first = false;
    yield day.itemsJson;
    totalSeconds += day.seconds;
    totalCharged += day.charged_seconds;
  }
  yield `],"total_seconds":${totalSeconds},"total_charged_seconds":${totalCharged}}`;
}
