import { getLiveLesson } from '../../../domain/lessons.js';
import { issueLink } from '../../../domain/links.js';
import { LinkSchema, presentLink } from '../../presenters/link.js';
import { defineRoute, LessonIdParams } from '../../route.js';
import { LinksCreateSchema } from './schema.js';

export const linkRoutes = [
  defineRoute({
    method: 'post',
    path: '/lessons/{id}/links',
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
];
