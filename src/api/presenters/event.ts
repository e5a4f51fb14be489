import { z } from 'zod';
import type { EventWithDelivery } from '../../webhooks/events.js';
import { iso } from './lesson.js';

export const EventDeliverySchema = z
  .object({
    state: z.enum(['pending', 'delivered', 'undelivered', 'cancelled']),
    attempts: z.number().int().describe('attempts made in the current round (a redeliver starts a new round)'),
    next_attempt_at: z.iso.datetime().nullable().describe('when pending: the time of the next attempt'),
    last_attempt_at: z.iso.datetime().nullable(),
    delivered_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'EventDelivery' });

/** An event as delivered (`id, type, created_at, data`) plus the state of its delivery. */
export const EventSchema = z
  .object({
    id: z.number().int(),
    type: z.string(),
    created_at: z.iso.datetime(),
    data: z.record(z.string(), z.unknown()),
    delivery: EventDeliverySchema.nullable().describe('null: no delivery was scheduled (no webhook was set when the event was recorded)'),
  })
  .meta({ id: 'Event' });

export function presentEvent(e: EventWithDelivery): z.infer<typeof EventSchema> {
  return {
    id: e.id,
    type: e.type,
    created_at: e.created_at.toISOString(),
    data: e.data,
    delivery: e.delivery && {
      state: e.delivery.state,
      attempts: e.delivery.attempts,
      next_attempt_at: iso(e.delivery.next_attempt_at),
      last_attempt_at: iso(e.delivery.last_attempt_at),
      delivered_at: iso(e.delivery.delivered_at),
    },
  };
}
