import { z } from 'zod';
import type { ConfiguredWebhook, WebhookState } from '../../webhooks/endpoint.js';
import type { DeliveryAttempt } from '../../webhooks/events.js';

export const WebhookSchema = z
  .object({
    url: z.string(),
    secret: z.string().describe('whsec_...; returned only in this response'),
    enabled_events: z.array(z.string()).describe('the event types sent to this webhook (webhook.test always is)'),
  })
  .meta({ id: 'Webhook' });

export function presentWebhook(w: ConfiguredWebhook): z.infer<typeof WebhookSchema> {
  return { url: w.url, secret: w.secret, enabled_events: w.enabled_events };
}

export const WebhookStateSchema = z
  .object({
    url: z.string(),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime().describe('the last PUT /webhook (each one made a new secret)'),
    rotation: z
      .object({ previous_secret_expires_at: z.iso.datetime() })
      .nullable()
      .describe('during a rotation: deliveries carry two v1 signatures, the new secret\'s and the previous one\'s, until this time; else null'),
    enabled_events: z.array(z.string()).describe('the event types sent to this webhook (webhook.test always is)'),
  })
  .meta({ id: 'WebhookState' });

export function presentWebhookState(w: WebhookState): z.infer<typeof WebhookStateSchema> {
  return {
    url: w.url,
    created_at: w.created_at.toISOString(),
    updated_at: w.updated_at.toISOString(),
    rotation: w.previous_secret_expires_at ? { previous_secret_expires_at: w.previous_secret_expires_at.toISOString() } : null,
    enabled_events: w.enabled_events,
  };
}

export const DeliveryAttemptSchema = z
  .object({
    id: z.number().int().describe('attempt id; the cursor for `after`'),
    event_id: z.number().int(),
    attempt: z.number().int().describe('1-9 within its round'),
    url: z.string(),
    address: z.string().nullable().describe('the checked IP address the request went to'),
    attempted_at: z.iso.datetime(),
    duration_ms: z.number().int(),
    status_code: z.number().int().nullable().describe('null when no response status was received'),
    error: z.string().nullable().describe('timeout, connection_refused, connection_reset, tls_error: ..., address_rejected: ..., ...'),
    delivered: z.boolean(),
  })
  .meta({ id: 'DeliveryAttempt' });

export function presentAttempt(a: DeliveryAttempt): z.infer<typeof DeliveryAttemptSchema> {
  return {
    id: a.id,
    event_id: a.event_id,
    attempt: a.attempt,
    url: a.url,
    address: a.address,
    attempted_at: a.attempted_at.toISOString(),
    duration_ms: a.duration_ms,
    status_code: a.status_code,
    error: a.error,
    delivered: a.delivered,
  };
}
