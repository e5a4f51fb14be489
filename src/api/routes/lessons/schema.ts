import { z } from 'zod';
import { queryNumber } from '../queryNumber.js';
import { LessonModeSchema, SubjectModeSchema } from '../../../domain/enums.js';

export const LessonsCreateSchema = z
  .object({
    title: z.string().min(1).max(255),
    external_id: z.string().min(1).max(128).nullable().optional().describe('1-128 characters; null or absent: none'),
    mode: LessonModeSchema.optional(),
    subject_mode: SubjectModeSchema.optional().describe('default generic'),
  })
  .meta({ id: 'LessonCreate' });

export const LessonsListQuery = z.object({
  external_id: z.string().min(1).max(128).optional().describe('all lessons with this external_id, archived ones included'),
  limit: queryNumber(z.number().int().min(1).max(100).default(50)).describe('without external_id: page size, 1-100'),
  after: z.string().min(1).max(64).optional().describe('without external_id: the last lesson id of the previous page'),
});
