import { getLiveLesson } from '../../../domain/lessons.js';
import { z } from 'zod';
import { issueLink, listLinks, revokeLink } from '../../../domain/links.js';
import { LinkInfoSchema, LinkSchema, presentLink, presentLinkInfo } from '../../presenters/link.js';
import { defineRoute, LessonIdParams } from '../../route.js';
import { LinkParams, LinksCreateSchema } from './schema.js';

export const linkRoutes = [
  defineRoute({
    method: 'post',
    path: '/lessons/{id}/links',
    operationId: 'createLink',
    tag: 'Links',
    summary: 'Issue a personal entry link for one participant',
    description:
      '402 minutes_exhausted while the balance is at or below zero (no link is issued; people already holding links can still enter). ' +
      '410 archived for a deleted lesson.',
    params: LessonIdParams,
    body: LinksCreateSchema,
    responses: { 201: { description: 'The participant link', schema: LinkSchema } },
    errors: ['not_found', 'archived', 'minutes_exhausted', 'validation_error'],
    async handler(ctx, { params, body }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      const link = await issueLink(deps.sql, {
        partner: auth.partner,
        lesson,
        input: body,
        embedBaseUrl: deps.config.EMBED_BASE_URL,
        at: deps.clock.now(),
      });
      ctx.status = 201;
      ctx.body = presentLink(link);
    },
  }),

  defineRoute({
    method: 'get',
    path: '/lessons/{id}/links',
    operationId: 'listLinks',
    tag: 'Links',
    summary: 'List the links issued for a lesson (never their tokens)',
    description: 'Oldest first. The token is not stored (only its hash): it exists only in the answer that issued it.',
    params: LessonIdParams,
    responses: { 200: { description: 'Links', schema: z.array(LinkInfoSchema) } },
    errors: ['not_found', 'archived'],
    async handler(ctx, { params }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      ctx.body = (await listLinks(deps.readSql, lesson.id)).map(presentLinkInfo);
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/lessons/{id}/links/{link_id}',
    operationId: 'revokeLink',
    tag: 'Links',
    summary: 'Revoke a link',
    description:
      'The page no longer opens with it, and every connection opened with it closes within 2 s (the participant sees that they were removed). ' +
      'Idempotent: revoking a revoked link answers 204 again. The person may come back with another link; to keep them out, remove the person.',
    params: LinkParams,
    responses: { 204: { description: 'Revoked' } },
    errors: ['not_found', 'archived'],
    async handler(ctx, { params }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      await revokeLink(deps.sql, lesson.id, params.link_id, deps.clock.now());
      ctx.status = 204;
    },
  }),
];
