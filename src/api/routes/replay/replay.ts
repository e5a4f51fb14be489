import { z } from 'zod';
import { getLiveLesson } from '../../../domain/lessons.js';
import { issueReplayLink, readHistory } from '../../../domain/replay.js';
import { HistoryEntrySchema, presentHistoryEntry, presentReplayLink, ReplayLinkSchema } from '../../presenters/history.js';
import { defineRoute, LessonIdParams } from '../../route.js';
import { HistoryQuery, ReplayLinkCreateSchema } from './schema.js';

const tag = 'Board content';

export const replayRoutes = [
  defineRoute({
    method: 'get',
    path: '/lessons/{id}/history',
    operationId: 'getBoardHistory',
    tag,
    summary: "The board's history: every committed operation, oldest first",
    description:
      'Each operation with its place in the order (`seq`), its time and its author. Applying them in order to an empty board ' +
      '(one page "page-1") gives the board as it was after any of them; after the last, the snapshot (docs/snapshot-format.md, "History"). ' +
      'Pass the last `seq` read as `after_seq`; the next page is also in the `Link: <...>; rel="next"` header. A page shorter than `limit` is the end, for now.',
    params: LessonIdParams,
    query: HistoryQuery,
    responses: { 200: { description: 'Operations', schema: z.array(HistoryEntrySchema), headers: { Link: 'next page, when there may be one' } } },
    errors: ['not_found', 'archived', 'validation_error'],
    async handler(ctx, { params, query }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      const page = await readHistory(deps.readSql, lesson.id, query.after_seq, query.limit);
      if (page.length === query.limit) {
        const next = new URLSearchParams({ after_seq: String(page[page.length - 1].seq), limit: String(query.limit) });
        ctx.set('Link', `<${ctx.path}?${next}>; rel="next"`);
      }
      ctx.set('Cache-Control', 'private, no-cache');
      ctx.body = page.map(presentHistoryEntry);
    },
  }),
  defineRoute({
    method: 'post',
    path: '/lessons/{id}/replay-links',
    operationId: 'createReplayLink',
    tag,
    summary: 'Issue a read-only link to the lesson\'s replay page',
    description:
      'The page plays the board back from its history, with the sessions and who was present on its timeline. The link changes nothing ' +
      'and is nobody: it opens no connection to the lesson, is never present, never starts or extends a session and is never billed ' +
      '(so it is issued at a zero balance too). It expires like an entry link (`ttl_minutes`, 15-720).',
    params: LessonIdParams,
    body: ReplayLinkCreateSchema,
    responses: { 201: { description: 'The replay link', schema: ReplayLinkSchema } },
    errors: ['not_found', 'archived', 'validation_error'],
    async handler(ctx, { params, body }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      const link = await issueReplayLink(deps.sql, { lesson, ttlMinutes: body.ttl_minutes, embedBaseUrl: deps.config.EMBED_BASE_URL, at: deps.clock.now() });
      ctx.status = 201;
      ctx.body = presentReplayLink(link);
    },
  }),
];
