import { z } from 'zod';
import type { Lesson } from '../../domain/lessons.js';

export const LessonSchema = z
  .object({
    id: z.string(),
    external_id: z.string().nullable(),
    title: z.string(),
    mode: z.enum(['full', 'board_only']),
    subject_mode: z.enum(['generic', 'math', 'physics']),
    created_at: z.iso.datetime(),
    started_at: z.iso.datetime().nullable(),
    ended_at: z.iso.datetime().nullable(),
    billed_seconds: z.number().int(),
    archived: z.boolean(),
  })
  .meta({ id: 'Lesson' });

export const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

export function presentLesson(l: Lesson): z.infer<typeof LessonSchema> {
  return {
    id: l.id,
    external_id: l.external_id,
    title: l.title,
    mode: l.mode,
    subject_mode: l.subject_mode,
    created_at: l.created_at.toISOString(),
    started_at: iso(l.started_at),
    ended_at: iso(l.ended_at),
    billed_seconds: l.billed_seconds,
    archived: l.archived_at !== null,
  };
}
