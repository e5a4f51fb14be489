import { z } from 'zod';
import { BOARD_LIMITS } from '../../src/board/limits.js';
import { FreehandSchema, IdSchema, PenPointSchema } from '../../src/board/schema.js';
import { CHAT_MAX_CHARS, SDP_MAX, STROKE_DELTA_MAX_POINTS } from './limits.js';

/**
 * Client -> server: every message a participant may send, core and lesson,
 * one zod schema each. The gateway validates frames with these (handlers in
 * protocol/messages/ and realtime/features/), docs/protocol.md is generated
 * from them (protocol/describe.ts) and the page imports their types. Imports
 * only zod and the board's schema module, so the page can import its types.
 */

const coordinate = z.number().min(-1e9).max(1e9);
const ref = z.string().min(1).max(64);
/** a person's public id in the lesson (welcome.you.id, presence person.id) */
export const PersonIdSchema = z.string().min(1).max(64);
/** one connection's public id in the call (welcome.call_id): 12 letters and digits */
export const CALL_ID = /^[A-Za-z0-9]{12}$/;
const toConn = z.string().regex(CALL_ID).optional();

/**
 * A stroke in progress (docs/protocol.md, "Strokes in progress"): its points
 * from index `from` on, sent as the pen moves and relayed to the others, never
 * stored. The first message (from 0) carries the stroke's other fields in
 * `head`. The stroke is stored by the board.op that commits it.
 */
export const strokeFields = {
  id: IdSchema,
  from: z.number().int().min(0).max(BOARD_LIMITS.freehandPoints),
  points: z.array(PenPointSchema).min(1).max(STROKE_DELTA_MAX_POINTS),
  head: FreehandSchema.omit({ points: true }).optional(),
};

export const IceCandidateSchema = z.object({
  candidate: z.string().max(4096),
  sdpMid: z.string().max(64).nullable().optional(),
  sdpMLineIndex: z.number().int().min(0).max(255).nullable().optional(),
});

const teacherMedia = (type: 'teacher.mute' | 'teacher.unmute') =>
  z.object({ type: z.literal(type), participant_id: PersonIdSchema, camera: z.boolean().default(false), mic: z.boolean().default(false) }).strict();

export const ClientMessages = {
  // ---- gateway core ----
  /** pointer position; unknown fields are dropped, so the relayed frame carries only these and `from` */
  cursor: z.object({
    type: z.literal('cursor'),
    x: coordinate,
    y: coordinate,
    /** board page the pointer is on */
    page: z.string().min(1).max(64).optional(),
    /** the editor's tool: `laser` draws a fading trail on the others' screens while the button is down */
    tool: z.enum(['pointer', 'laser']).optional(),
    button: z.enum(['up', 'down']).optional(),
  }),
  /** my pointer left the board (off the canvas, tab hidden): the others stop showing it */
  'cursor.leave': z.object({ type: z.literal('cursor.leave') }).strict(),
  ping: z.object({ type: z.literal('ping'), id: z.union([z.string().max(64), z.number()]).optional() }),
  // ---- board ----
  /** a board operation (BoardOpSchema, checked by the board); `ref` comes back on board.ack / board.reject */
  'board.op': z.object({ type: z.literal('board.op'), ref, op: z.unknown() }).strict(),
  /** asks for the board: everything (since 0) or what changed after `since` */
  'board.sync': z.object({ type: z.literal('board.sync'), since: z.number().int().min(0) }).strict(),
  /** new points of the stroke I am drawing; relayed to the others, not stored */
  'board.stroke': z.object({ type: z.literal('board.stroke'), ...strokeFields }).strict(),
  // ---- following a view ----
  /** the part of the board I see (scene coordinates) on `page`: for the people who follow me */
  view: z.object({ type: z.literal('view'), page: IdSchema, x1: coordinate, y1: coordinate, x2: coordinate, y2: coordinate }).strict(),
  /** whom I follow now (null: nobody) */
  follow: z.object({ type: z.literal('follow'), to: PersonIdSchema.nullable() }).strict(),
  /** teacher: everyone (students present and later joiners) follows me, or stops */
  lead: z.object({ type: z.literal('lead'), on: z.boolean() }).strict(),
  // ---- chat ----
  'chat.send': z.object({ type: z.literal('chat.send'), text: z.string().trim().min(1).max(CHAT_MAX_CHARS) }).strict(),
  // ---- call (full lessons) ----
  /** a tab that joined asks each connection of `to` to offer it a call */
  'rtc.hello': z.object({ type: z.literal('rtc.hello'), to: PersonIdSchema }).strict(),
  /** WebRTC signalling, relayed to one person of the same lesson, for its connection `to_conn` when given */
  'rtc.offer': z.object({ type: z.literal('rtc.offer'), to: PersonIdSchema, sdp: z.string().max(SDP_MAX), to_conn: toConn }).strict(),
  'rtc.answer': z.object({ type: z.literal('rtc.answer'), to: PersonIdSchema, sdp: z.string().max(SDP_MAX), to_conn: toConn }).strict(),
  'rtc.ice': z.object({ type: z.literal('rtc.ice'), to: PersonIdSchema, candidate: IceCandidateSchema, to_conn: toConn }).strict(),
  /** my camera/microphone are on or off */
  'media.state': z.object({ type: z.literal('media.state'), camera: z.boolean(), mic: z.boolean() }).strict(),
  // ---- teacher actions ----
  /** teacher: turn off a student's camera and/or microphone */
  'teacher.mute': teacherMedia('teacher.mute'),
  /** teacher: allow a student to turn their camera and/or microphone on again (they do it themselves) */
  'teacher.unmute': teacherMedia('teacher.unmute'),
  /** teacher: remove a participant; their link cannot re-enter this lesson */
  'teacher.remove': z.object({ type: z.literal('teacher.remove'), participant_id: PersonIdSchema }).strict(),
} as const;

export type ClientMessageType = keyof typeof ClientMessages;
/** What the page sends: the schemas' input types (defaults such as teacher.mute's `camera` may be left out). */
export type ClientMessage = { [K in ClientMessageType]: z.input<(typeof ClientMessages)[K]> }[ClientMessageType];

const all = Object.values(ClientMessages) as (typeof ClientMessages)[ClientMessageType][];
/** Any client message, by `type`. */
export const ClientMessageSchema = z.discriminatedUnion('type', all as [(typeof all)[number], ...(typeof all)[number][]]);
