import { z } from 'zod';
import type { Lesson } from '../../domain/lessons.js';
import { LessonModeSchema, SubjectModeSchema } from '../../domain/enums.js';

export const LessonSchema = z
  .object({
    id: z.string().describe('lsn_ followed by 22 characters; opaque, at most 64 characters'),
    external_id: z.string().nullable().describe("the partner's own id, unique among its live lessons; null when none"),
    title: z.string(),
    mode: LessonModeSchema.describe('full: board, video call and chat; board_only: board and chat, no video'),
    subject_mode: SubjectModeSchema,
    created_at: z.iso.datetime(),
    started_at: z.iso.datetime().nullable().describe('start of the latest session: the moment a second person was present; null before the first'),
    ended_at: z.iso
      .datetime()
      .nullable()
      .describe('end of the latest session: the moment the lesson became empty (the session ends after 5 minutes without anyone; the wait is not lesson time); null while a session runs or before the first'),
    billed_seconds: z.number().int().describe('metered lesson time since creation, all sessions'),
    archived: z.boolean().describe('true after DELETE; every route naming the lesson then answers 410 archived'),
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

export const LessonListItemSchema = LessonSchema.extend({
  session_running: z.boolean().optional().describe('a session runs now (two or more people came and the lesson has not been empty for 5 minutes since); in the list without external_id only'),
  people_now: z.number().int().nullable().optional().describe('people in the lesson now, on every gateway node; null when presence could not be read; in the list without external_id only'),
}).meta({ id: 'LessonListItem' });

export function presentLessonListItem(l: Lesson, peopleNow: number | null): z.infer<typeof LessonListItemSchema> {
  return { ...presentLesson(l), session_running: l.started_at !== null && l.ended_at === null && l.archived_at === null, people_now: peopleNow };
}
