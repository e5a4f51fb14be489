import { z } from 'zod';
import { listEvents, redeliverEvent } from '../../../webhooks/events.js';
import { EventSchema, presentEvent } from '../../presenters/event.js';
import { defineRoute } from '../../route.js';
import { EventIdParams, EventsListQuery } from './schema.js';

const tag = 'Events';

export const eventRoutes = [
  defineRoute({
    method: 'get',
    path: '/events',
    operationId: 'listEvents',
    tag,
    summary: "The partner's events in id order, with their delivery state",
    description:
      'Every event is here, delivered or not, also those recorded while no webhook was set. ' +
      'Pass the last `id` seen as `after`; the next page is also in the `Link: <...>; rel="next"` header.',
    query: EventsListQuery,
    responses: { 200: { description: 'Events', schema: z.array(EventSchema), headers: { Link: 'next page, when there may be one' } } },
    errors: ['validation_error'],
    async handler(ctx, { query }) {
      const { deps, auth } = ctx.state;
      const page = await listEvents(deps.sql, auth.partner.id, query);
      if (page.length === query.limit) {
        const next = new URLSearchParams({ after: String(page[page.length - 1].id), limit: String(query.limit) });
        ctx.set('Link', `<${ctx.path}?${next}>; rel="next"`);
      }
      ctx.body = page.map(presentEvent);
    },
  }),
  defineRoute({
    method: 'post',
    path: '/events/{id}/redeliver',
    operationId: 'redeliverEvent',
    tag,
    summary: 'Deliver an event again, with the same event id',
    description:
      'Schedules a fresh delivery now with a full set of attempts (9, on the usual schedule), whatever the earlier outcome. ' +
      'Requires a configured webhook.',
    params: EventIdParams,
    responses: { 202: { description: 'The event with its new delivery state', schema: EventSchema } },
    errors: ['not_found', 'no_webhook'],
    async handler(ctx, { params }) {
      const { deps, auth } = ctx.state;
      ctx.status = 202;
      ctx.body = presentEvent(await redeliverEvent(deps.sql, auth.partner.id, params.id, deps.clock.now()));
    },
  }),
];
