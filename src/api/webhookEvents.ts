import { z } from 'zod';
import { LessonModeSchema, RoleSchema } from '../domain/enums.js';

/**
 * The request bodies of webhook deliveries, one schema per event type, for the
 * OpenAPI document's `webhooks` (OpenAPI 3.1). They describe what
 * src/metering/ and src/webhooks/events.ts record; test/api/contract.test.ts
 * checks real deliveries against them. Open to new fields, like every response.
 */
const lessonRef = {
  lesson_id: z.string(),
  external_id: z.string().nullable().describe("the partner's own id of the lesson, null when none was given"),
};
const personRef = {
  person: z.string().describe("the partner's reference to the person (psn_…), as returned with the link"),
  link_id: z.string().describe('the link the person came through (for participant.left: the link of the arrival that began the interval)'),
};
const sessionData = {
  ...lessonRef,
  started_at: z.iso.datetime().describe('start of this session: the moment a second person was present'),
};
const balanceData = z.object({
  balance_seconds: z.number().int().describe('the balance after the charge that crossed the line (may be negative)'),
  balance_minutes: z.number().int().describe('whole minutes, truncated toward zero'),
});

const event = <T extends string, D extends z.ZodType>(type: T, id: string, data: D, description: string) =>
  z
    .object({
      id: z.number().int().describe('grows, never repeated; the same on every retry and redelivery: drop duplicates by it'),
      type: z.literal(type),
      created_at: z.iso.datetime().describe('when the event was recorded; order by it (delivery order is not guaranteed)'),
      data,
    })
    .describe(description)
    .meta({ id });

export const WEBHOOK_EVENTS = {
  'lesson.started': event(
    'lesson.started',
    'LessonStartedEvent',
    z.object({ ...sessionData, ended_at: z.null(), minutes: z.literal(0) }),
    'Two or more people are in the lesson and metering begins (also when a board is reused: every session starts with this event).',
  ),
  'lesson.ended': event(
    'lesson.ended',
    'LessonEndedEvent',
    z.object({
      ...sessionData,
      ended_at: z.iso
        .datetime()
        .describe('the moment the lesson became empty (the session ends after 5 minutes without anyone, and ended_at is back-dated to when the last person left); for a deleted lesson, the deletion'),
      minutes: z.number().int().describe("metered whole minutes of this session, truncated"),
      mode: LessonModeSchema.describe('with (full) or without (board_only) video'),
    }),
    'Five minutes with nobody in the lesson, or the lesson was deleted while a session ran.',
  ),
  'participant.joined': event(
    'participant.joined',
    'ParticipantJoinedEvent',
    z.object({ ...lessonRef, role: RoleSchema, name: z.string(), ...personRef }),
    'A person entered a lesson; at most once per 6 hours per person and lesson.',
  ),
  'participant.left': event(
    'participant.left',
    'ParticipantLeftEvent',
    z.object({
      ...lessonRef,
      role: RoleSchema,
      name: z.string(),
      ...personRef,
      joined_at: z.iso.datetime().describe('the start of the interval: the person became present'),
      left_at: z.iso.datetime().describe("the person's last connection to the lesson went, dated as metering dates it (a connection lost without a close: its last sign of life)"),
      seconds: z.number().int().describe('left_at - joined_at, whole seconds'),
    }),
    "A person's last connection to the lesson went: one interval of GET /lessons/{id}/attendance. Sent only to a webhook whose enabled_events lists it.",
  ),
  'balance.low': event('balance.low', 'BalanceLowEvent', balanceData, 'Less than one hour of balance remains; once per crossing of the line, re-armed by a top-up.'),
  'balance.exhausted': event('balance.exhausted', 'BalanceExhaustedEvent', balanceData, 'The balance reached zero; new links answer 402 until a top-up. Once per crossing, re-armed by a top-up.'),
  'webhook.test': event('webhook.test', 'WebhookTestEvent', z.object({ message: z.string() }), 'POST /webhook/test was called.'),
} as const;

export type WebhookEventType = keyof typeof WEBHOOK_EVENTS;
