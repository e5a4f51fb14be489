import { z } from 'zod';
import type { UsageReport } from '../../reports/usage.js';

export const UsageItemSchema = z
  .object({
    lesson_id: z.string(),
    external_id: z.string().nullable(),
    mode: z.enum(['full', 'board_only']),
    day: z.iso.date().describe('Moscow day'),
    seconds: z.number().int().describe('metered lesson time that day'),
    charged_seconds: z.number().int().describe('what that time deducted from the balance'),
  })
  .meta({ id: 'UsageItem' });

export const UsageReportSchema = z
  .object({
    from: z.iso.date().describe('first Moscow day of the applied period'),
    to: z.iso.date().describe('last Moscow day of the applied period (inclusive)'),
    total_seconds: z.number().int(),
    total_charged_seconds: z.number().int(),
    items: z.array(UsageItemSchema).describe('one item per lesson per day, by day then lesson id'),
  })
  .meta({ id: 'UsageReport' });

export function presentUsage(r: UsageReport): z.infer<typeof UsageReportSchema> {
  return {
    from: r.from,
    to: r.to,
    total_seconds: r.total_seconds,
    total_charged_seconds: r.total_charged_seconds,
    items: r.items.map((i) => ({
      lesson_id: i.lesson_id,
      external_id: i.external_id,
      mode: i.mode,
      day: i.day,
      seconds: i.seconds,
      charged_seconds: i.charged_seconds,
    })),
  };
}
