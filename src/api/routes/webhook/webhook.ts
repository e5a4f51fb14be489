import { z } from 'zod';
import { Errors } from '../../../errors.js';
import { getWebhook, removeWebhook, setWebhook } from '../../../webhooks/endpoint.js';
import { listAttempts, sendTestEvent } from '../../../webhooks/events.js';
import { EventSchema, presentEvent } from '../../presenters/event.js';
import { DeliveryAttemptSchema, presentAttempt, presentWebhook, presentWebhookState, WebhookSchema, WebhookStateSchema } from '../../presenters/webhook.js';
import { defineRoute } from '../../route.js';
import { DeliveriesQuery, WebhookPutSchema } from './schema.js';

const tag = 'Webhook';

export const webhookRoutes = [
  defineRoute({
    method: 'put',
    path: '/webhook',
    operationId: 'setWebhook',
    tag,
    summary: 'Set the webhook address; returns a new signing secret',
    description:
      'Every call generates a new `whsec_` secret, returned only in this response; it signs every attempt made after this call. ' +
      'With `rotate: true` the previous secret also signs (a second `v1=` in X-Whiteboard-Signature) for `overlap_minutes` ' +
      '(default 24 h), so receivers can switch without rejecting deliveries; without it the previous secret stops at once. ' +
      'The address must use https://, be at most 2,048 characters, carry no credentials, and every address its host resolves to must be public.',
    body: WebhookPutSchema,
    responses: { 200: { description: 'The webhook and its new secret', schema: WebhookSchema } },
    errors: ['bad_url', 'validation_error'],
    async handler(ctx, { body }) {
      const { deps, auth } = ctx.state;
      const rotate = body.rotate ? { overlapMs: body.overlap_minutes * 60_000 } : undefined;
      ctx.body = presentWebhook(await setWebhook(deps, auth.partner.id, body.url, { rotate, enabledEvents: body.enabled_events }));
    },
  }),
  defineRoute({
    method: 'get',
    path: '/webhook',
    operationId: 'getWebhook',
    tag,
    summary: 'The configured webhook: its address and rotation state (never the secret)',
    description: 'The secret is shown only once, in the response of PUT /webhook. 404 not_found when no webhook is set.',
    responses: { 200: { description: 'The webhook', schema: WebhookStateSchema } },
    errors: ['not_found'],
    async handler(ctx) {
      const { deps, auth } = ctx.state;
      const state = await getWebhook(deps, auth.partner.id);
      if (!state) throw Errors.notFound('Webhook');
      ctx.body = presentWebhookState(state);
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/webhook',
    operationId: 'deleteWebhook',
    tag,
    summary: 'Remove the webhook; pending deliveries are cancelled',
    responses: { 204: { description: 'Removed (also when none was set)' } },
    errors: [],
    async handler(ctx) {
      const { deps, auth } = ctx.state;
      await removeWebhook(deps, auth.partner.id);
      ctx.status = 204;
    },
  }),
  defineRoute({
    method: 'post',
    path: '/webhook/test',
    operationId: 'testWebhook',
    tag,
    summary: 'Send a webhook.test event to the configured address',
    description: 'Records a `webhook.test` event and answers at once with it; the dispatcher delivers it like any other event.',
    responses: { 202: { description: 'The test event, as it will be delivered, with its delivery state', schema: EventSchema } },
    errors: ['no_webhook'],
    async handler(ctx) {
      const { deps, auth } = ctx.state;
      ctx.status = 202;
      ctx.body = presentEvent(await sendTestEvent(deps.sql, auth.partner.id, deps.clock.now()));
    },
  }),
  defineRoute({
    method: 'get',
    path: '/webhook/deliveries',
    operationId: 'listWebhookDeliveries',
    tag,
    summary: 'The delivery log: every attempt, oldest first',
    description: 'Cursor-paginated by attempt id: pass the last `id` as `after`; the next page is also in the `Link: <...>; rel="next"` header.',
    query: DeliveriesQuery,
    responses: {
      200: { description: 'Attempts', schema: z.array(DeliveryAttemptSchema), headers: { Link: 'next page, when there may be one' } },
    },
    errors: ['validation_error'],
    async handler(ctx, { query }) {
      const { deps, auth } = ctx.state;
      const page = await listAttempts(deps.sql, auth.partner.id, { eventId: query.event_id, after: query.after, limit: query.limit });
      if (page.length === query.limit) {
        const next = new URLSearchParams({ after: String(page[page.length - 1].id), limit: String(query.limit) });
        if (query.event_id !== undefined) next.set('event_id', String(query.event_id));
        ctx.set('Link', `<${ctx.path}?${next}>; rel="next"`);
      }
      ctx.body = page.map(presentAttempt);
    },
  }),
];
