import { z } from 'zod';
import { queryNumber } from '../queryNumber.js';
import { LessonModeSchema, SubjectModeSchema } from '../../../domain/enums.js';
import { LESSON_STATUSES } from '../../../domain/lessons.js';

export const LessonsCreateSchema = z
  .object({
    title: z.string().min(1).max(255),
    external_id: z.string().min(1).max(128).nullable().optional().describe('1-128 characters; null or absent: none'),
    mode: LessonModeSchema.optional(),
    subject_mode: SubjectModeSchema.optional().describe('default generic'),
  })
  .meta({ id: 'LessonCreate' });

const cursor = z.string().min(1).max(64);

export const LessonsListQuery = z.object({
  external_id: z.string().min(1).max(128).optional().describe('all lessons with this external_id, archived ones included (the other parameters do not apply)'),
  limit: queryNumber(z.number().int().min(1).max(100).default(50)).describe('without external_id: page size, 1-100'),
  starting_after: cursor.optional().describe('without external_id: the last lesson id of the previous page (the `Link: rel="next"` header carries it)'),
  after: cursor.optional().describe('the same as starting_after (its earlier name)'),
  status: z.enum(LESSON_STATUSES).optional().describe('live: a session runs; ended: its latest session ended; never_started: no session yet; archived: deleted. Default: every lesson not archived'),
  'created[gte]': z.iso.datetime().optional().describe('created at or after this time'),
  'created[lt]': z.iso.datetime().optional().describe('created before this time'),
});

export const LessonsPatchSchema = z
  .object({
    title: z.string().min(1).max(255).optional(),
    subject_mode: SubjectModeSchema.optional(),
    mode: LessonModeSchema.optional().describe('only while no session runs (409 session_running), and under the plan (403 plan_board_only)'),
  })
  .refine((b) => b.title !== undefined || b.subject_mode !== undefined || b.mode !== undefined, { message: 'give at least one of title, subject_mode, mode' })
  .meta({ id: 'LessonPatch' });
