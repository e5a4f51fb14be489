import { z } from 'zod';

/**
 * from/to stay plain strings here: a malformed date is a bad period, which the
 * spec answers with 400 bad_range (src/reports/period.ts), not a 422.
 */
export const ReportPeriodQuery = z.object({
  from: z.string().optional().describe('YYYY-MM-DD, first Moscow day (inclusive). Alone: from that day through today'),
  to: z.string().optional().describe('YYYY-MM-DD, last Moscow day (inclusive); needs from. Neither: the last 30 days, today included'),
});

export const UsageQuery = ReportPeriodQuery;
