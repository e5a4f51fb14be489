import { hash } from 'node:crypto';
import { z } from 'zod';
import {
  archiveLesson,
  createLesson,
  findLessonsByExternalId,
  getLiveLesson,
  listLessons,
  updateLesson,
} from '../../../domain/lessons.js';
import { peopleNow } from '../../peopleNow.js';
import { LessonListItemSchema, LessonSchema, presentLesson, presentLessonListItem } from '../../presenters/lesson.js';
import { answerNotModified } from '../../conditional.js';
import { defineRoute, LessonIdParams } from '../../route.js';
import { LessonsCreateSchema, LessonsListQuery, LessonsPatchSchema } from './schema.js';

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
    summary: 'Find lessons by external_id, or list lessons newest first',
    description:
      'With external_id: every lesson with that id, archived ones included (archived: true), newest first. ' +
      'Without it: lessons newest first, `limit` per page, filtered by `status` and `created[gte]`/`created[lt]`; ' +
      'the next page is in the `Link: <...starting_after=<last id>...>; rel="next"` header, present when the page is full.',
    query: LessonsListQuery,
    responses: { 200: { description: 'Lessons', schema: z.array(LessonListItemSchema), headers: { Link: 'next page, when there is one' } } },
    errors: ['validation_error', 'bad_request'],
    async handler(ctx, { query }) {
      const { deps, auth } = ctx.state;
      if (query.external_id !== undefined) {
        ctx.body = (await findLessonsByExternalId(deps.readSql, auth.partner.id, query.external_id)).map(presentLesson);
        return;
      }
      const created = (v?: string) => (v === undefined ? undefined : new Date(v));
      const page = await listLessons(deps.readSql, auth.partner.id, {
        limit: query.limit,
        after: query.starting_after ?? query.after,
        status: query.status,
        createdGte: created(query['created[gte]']),
        createdLt: created(query['created[lt]']),
      });
      if (page.length === query.limit) {
        const next = new URLSearchParams({ limit: String(query.limit), starting_after: page[page.length - 1].id });
        for (const k of ['status', 'created[gte]', 'created[lt]'] as const) if (query[k] !== undefined) next.set(k, query[k]);
        ctx.set('Link', `<${ctx.path}?${next}>; rel="next"`);
      }
      const people = await peopleNow(deps, page.map((l) => l.id));
      ctx.body = page.map((l, i) => presentLessonListItem(l, people[i]));
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
    method: 'patch',
    path: '/lessons/{id}',
    operationId: 'updateLesson',
    tag,
    summary: "Change a lesson's title, subject mode or mode",
    description:
      'People in the lesson see the new title and toolset at once. `mode` changes only while no session runs (409 session_running) and under the plan (403 plan_board_only); ' +
      'a person present alone gets the new mode when their page next connects.',
    params: LessonIdParams,
    body: LessonsPatchSchema,
    responses: { 200: { description: 'The lesson', schema: LessonSchema } },
    errors: ['not_found', 'archived', 'plan_board_only', 'session_running', 'validation_error'],
    async handler(ctx, { params, body }) {
      const { deps, auth } = ctx.state;
      ctx.body = presentLesson(await updateLesson(deps.sql, auth.partner, params.id, body));
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
