import { hash } from 'node:crypto';
import { z } from 'zod';
import {
  archiveLesson,
  createLesson,
  findLessonsByExternalId,
  getLiveLesson,
  listLessons,
} from '../../../domain/lessons.js';
import { LessonSchema, presentLesson } from '../../presenters/lesson.js';
import { answerNotModified } from '../../conditional.js';
import { defineRoute, LessonIdParams } from '../../route.js';
import { LessonsCreateSchema, LessonsListQuery } from './schema.js';

const tag = 'Lessons';

export const lessonRoutes = [
  defineRoute({
    method: 'post',
    path: '/lessons',
    operationId: 'createLesson',
    tag,
    summary: 'Create a lesson',
    body: LessonsCreateSchema,
    responses: { 201: { description: 'The lesson', schema: LessonSchema } },
    errors: ['conflict', 'plan_board_only', 'validation_error'],
    async handler(ctx, { body }) {
      const { deps, auth } = ctx.state;
      const lesson = await createLesson(deps.sql, auth.partner, { ...body, external_id: body.external_id ?? undefined }, deps.clock.now());
      ctx.status = 201;
      ctx.body = presentLesson(lesson);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/lessons',
    operationId: 'listLessons',
    tag,
    summary: 'Find lessons by external_id, or list live lessons newest first',
    description:
      'With external_id: every lesson with that id, archived ones included (archived: true), newest first. ' +
      'Without it: live lessons newest first, `limit` per page; the next page is in the `Link: <...>; rel="next"` header.',
    query: LessonsListQuery,
    responses: { 200: { description: 'Lessons', schema: z.array(LessonSchema), headers: { Link: 'next page, when there is one' } } },
    errors: ['validation_error', 'bad_request'],
    async handler(ctx, { query }) {
      const { deps, auth } = ctx.state;
      if (query.external_id !== undefined) {
        ctx.body = (await findLessonsByExternalId(deps.readSql, auth.partner.id, query.external_id)).map(presentLesson);
        return;
      }
      const page = await listLessons(deps.readSql, auth.partner.id, { limit: query.limit, after: query.after });
      if (page.length === query.limit) {
        const next = new URLSearchParams({ limit: String(query.limit), after: page[page.length - 1].id });
        ctx.set('Link', `<${ctx.path}?${next}>; rel="next"`);
      }
      ctx.body = page.map(presentLesson);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/lessons/{id}',
    operationId: 'getLesson',
    tag,
    summary: 'Get a lesson',
    params: LessonIdParams,
    responses: {
      200: { description: 'The lesson', schema: LessonSchema, headers: { ETag: 'weak tag of the lesson as shown; changes when any field does' } },
      304: { description: 'Not modified (If-None-Match matched the current ETag)' },
    },
    errors: ['not_found', 'archived'],
    async handler(ctx, { params }) {
      const { auth } = ctx.state;
      const json = JSON.stringify(presentLesson(await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id)));
      // no version column: the tag is a digest of what is shown (~2 us for a lesson); the text is sent as is
      if (answerNotModified(ctx, `W/"${hash('sha256', json, 'base64url').slice(0, 22)}"`)) return;
      ctx.type = 'application/json';
      ctx.body = json;
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/lessons/{id}',
    operationId: 'archiveLesson',
    tag,
    summary: 'Archive a lesson',
    description: 'Links stop opening, people in the lesson are disconnected, the running session is charged up to now and ends.',
    params: LessonIdParams,
    responses: { 204: { description: 'Archived' } },
    errors: ['not_found', 'archived'],
    async handler(ctx, { params }) {
      const { deps, auth } = ctx.state;
      await archiveLesson(deps.sql, auth.partner.id, params.id, deps.clock.now());
      ctx.status = 204;
    },
  }),
];
