import { z } from 'zod';
import type { CallItem, CallsReport } from '../../reports/calls.js';
import { kopecksToRub } from '../../reports/pricing.js';
import { iso } from './lesson.js';
import { LessonModeSchema } from '../../domain/enums.js';

export const CallItemSchema = z
  .object({
    id: z.string(),
    lesson_id: z.string(),
    title: z.string(),
    external_id: z.string().nullable(),
    mode: LessonModeSchema,
    started_at: z.iso.datetime(),
    ended_at: z.iso.datetime().nullable().describe('null while the session is going'),
    going: z.boolean(),
    seconds: z.number().int().describe('metered time (two or more people present), up to the last charge while going'),
    charged_seconds: z.number().int(),
    cost_rub: z.number().describe('charged minutes at the average price of minutes at the session start, rounded half up to the kopeck'),
    people: z.number().int().describe('most people present at the same time'),
  })
  .meta({ id: 'CallItem' });

export const CallsReportSchema = z
  .object({
    from: z.iso.date(),
    to: z.iso.date(),
    total: z.object({
      count: z.number().int(),
      seconds: z.number().int(),
      charged_seconds: z.number().int(),
      cost_rub: z.number().describe("sum of the items' cost_rub over the whole period"),
    }),
    items: z.array(CallItemSchema).describe('newest first'),
  })
  .meta({ id: 'CallsReport' });

function presentCall(c: CallItem): z.infer<typeof CallItemSchema> {
  return {
    id: String(c.id),
    lesson_id: c.lesson_id,
    title: c.title,
    external_id: c.external_id,
    mode: c.mode,
    started_at: c.started_at.toISOString(),
    ended_at: iso(c.ended_at),
    going: c.ended_at === null,
    seconds: c.seconds,
    charged_seconds: c.charged_seconds,
    cost_rub: kopecksToRub(c.cost_kopecks),
    people: c.people_max,
  };
}

export function presentCalls(r: CallsReport): z.infer<typeof CallsReportSchema> {
  return {
    from: r.from,
    to: r.to,
    total: {
      count: r.total.count,
      seconds: r.total.seconds,
      charged_seconds: r.total.charged_seconds,
      cost_rub: kopecksToRub(r.total.cost_kopecks),
    },
    items: r.items.map(presentCall),
  };
}
