import { z } from 'zod';
import type { PublicPerson } from '../presence/Presence.js';

/**
 * Messages the server sends. The schemas document the protocol
 * (protocol/describe.ts prints them for docs/protocol.md) and the tests check
 * real frames against them; the builders below produce the frames.
 */
export const PersonSchema = z.object({
  /** per-lesson public id of a person (not the partner's user id, not linkable across lessons) */
  id: z.string(),
  name: z.string(),
  role: z.enum(['teacher', 'student']),
});

export const WelcomeMessage = z
  .object({
    type: z.literal('welcome'),
    protocol: z.literal(1),
    /** presence sequence: presence events with seq <= this are already reflected in `people` */
    seq: z.number(),
    you: PersonSchema,
    lesson: z.object({
      id: z.string(),
      title: z.string(),
      mode: z.enum(['full', 'board_only']),
      subject_mode: z.enum(['generic', 'math', 'physics']),
    }),
    /** everyone present, you included */
    people: z.array(PersonSchema),
    limits: z.object({
      max_payload_bytes: z.number(),
      messages_per_second: z.number(),
      message_burst: z.number(),
      idle_timeout_seconds: z.number(),
    }),
  })
  .catchall(z.unknown()); // features add their own fields (e.g. the board state)

export const PresenceMessage = z.discriminatedUnion('event', [
  z.object({ type: z.literal('presence'), event: z.literal('joined'), person: PersonSchema, seq: z.number(), count: z.number() }),
  z.object({ type: z.literal('presence'), event: z.literal('left'), person: PersonSchema, seq: z.number(), count: z.number() }),
  z.object({ type: z.literal('presence'), event: z.literal('sync'), people: z.array(PersonSchema), seq: z.number(), count: z.number() }),
]);

export const CursorRelayMessage = z.object({
  type: z.literal('cursor'),
  from: z.string(),
  x: z.number(),
  y: z.number(),
  page: z.string().optional(),
});

export const PongMessage = z.object({ type: z.literal('pong'), id: z.union([z.string(), z.number()]).optional(), t: z.number() });

export const ErrorMessage = z.object({
  type: z.literal('error'),
  code: z.enum(['bad_json', 'bad_message', 'unknown_type', 'invalid_message', 'binary_not_supported', 'not_ready', 'rate_limited', 'internal']),
  message: z.string(),
  /** the offending message type, when known */
  ref: z.string().optional(),
});

export type ErrorCode = z.infer<typeof ErrorMessage>['code'];

export const presenceFrame = (event: 'joined' | 'left', person: PublicPerson, seq: number, count: number) =>
  JSON.stringify({ type: 'presence', event, person, seq, count });

export const presenceSyncFrame = (people: PublicPerson[], seq: number) =>
  JSON.stringify({ type: 'presence', event: 'sync', people, seq, count: people.length });

export const errorFrame = (code: ErrorCode, message: string, ref?: string) =>
  JSON.stringify({ type: 'error', code, message, ...(ref ? { ref } : {}) });
