import { z } from 'zod';
import { Errors } from '../../../errors.js';

/**
 * A report day. It stays a plain string for validation: a malformed date is a
 * bad period, which the spec answers with 400 bad_range (src/reports/period.ts),
 * not a 422; the document still says `format: date`. Given twice
 * (`from=a&from=b`) it is a bad period too, not a 422.
 */
const periodDay = (name: string, description: string) =>
  z.preprocess((v) => {
    if (Array.isArray(v)) throw Errors.badRange(`${name} is given more than once`);
    return v;
  }, z.string().meta({ format: 'date' }).optional().describe(description));

export const ReportPeriodQuery = z.object({
  from: periodDay('from', 'YYYY-MM-DD, first Moscow day (inclusive). Alone: from that day through today'),
  to: periodDay('to', 'YYYY-MM-DD, last Moscow day (inclusive); needs from. Neither: the last 30 days, today included'),
});

export const UsageQuery = ReportPeriodQuery;
