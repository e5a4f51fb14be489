import { z } from 'zod';
import { queryNumber } from '../queryNumber.js';
import { EVENT_TYPES } from '../../../events/outbox.js';

/** Any string is read as an address; one the rules refuse answers 400 bad_url (not 422). */
export const WebhookPutSchema = z
  .object({
    url: z.string().describe('https:// address, public, at most 2,048 characters, no credentials'),
    rotate: z
      .boolean()
      .default(false)
      .describe('true: the secret in use until now keeps signing beside the new one for overlap_minutes; false: it stops at once'),
    overlap_minutes: z
      .number()
      .int()
      .min(1)
      .max(7 * 24 * 60)
      .default(24 * 60)
      .describe('with rotate: how long the previous secret stays valid, 1-10080 minutes (7 days), default 1440 (24 h)'),
    enabled_events: z
      .array(z.enum(EVENT_TYPES))
      .min(1)
      .optional()
      .describe("the event types to send (webhook.test is always sent). Absent: a new webhook gets the specification's six types, an existing one keeps its list. Types beyond the six (participant.left) are sent only when listed here"),
  })
  .meta({ id: 'WebhookPut' });

export const DeliveriesQuery = z.object({
  event_id: queryNumber(z.number().int().positive().optional()).describe('only the attempts of this event'),
  after: queryNumber(z.number().int().min(0).default(0)).describe('the last attempt id of the previous page'),
  limit: queryNumber(z.number().int().min(1).max(1000).default(100)).describe('page size, 1-1000'),
});
