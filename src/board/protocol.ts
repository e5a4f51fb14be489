import { z } from 'zod';
import { BOARD_ERROR_CODES } from './errors.js';
import { BOARD_LIMITS } from './limits.js';
import { ElementSchema, FreehandSchema, IdSchema, PageSchema, PenPointSchema } from './schema.js';

/**
 * The lesson messages of the participant protocol (docs/board-protocol.md):
 * board operations, resync, chat, WebRTC signalling, media state and teacher
 * actions. One zod schema per message type, shared by the page (web/) and the
 * gateway; the gateway's own messages (welcome, presence, cursor, close codes)
 * are in docs/protocol.md. Imports nothing but zod, so the page can bundle it.
 */
export const CHAT_MAX_CHARS = 2000;
/** An SDP blob is a few KB; 64 KB leaves room for many codecs and candidates. */
const SDP_MAX = 64 * 1024;

const ref = z.string().min(1).max(64);

/**
 * A stroke in progress (docs/board-protocol.md, "Strokes in progress"): its
 * points from index `from` on, sent as the pen moves and relayed to the
 * others, never stored. The first message (from 0) carries the stroke's other
 * fields in `head`. The stroke is stored by the board.op that commits it.
 */
const strokeFields = {
  id: IdSchema,
  from: z.number().int().min(0).max(BOARD_LIMITS.freehandPoints),
  points: z.array(PenPointSchema).min(1).max(500),
  head: FreehandSchema.omit({ points: true }).optional(),
};
const participantId = z.string().min(1).max(64);

// ---- client -> server ----

export const ClientMessages = {
  /** a board operation (BoardOpSchema); `ref` comes back on board.ack / board.reject */
  'board.op': z.object({ type: z.literal('board.op'), ref, op: z.unknown() }).strict(),
  /** asks for the board: everything (since 0) or what changed after `since` */
  'board.sync': z.object({ type: z.literal('board.sync'), since: z.number().int().min(0) }).strict(),
  /** new points of the stroke I am drawing; relayed to the others, not stored */
  'board.stroke': z.object({ type: z.literal('board.stroke'), ...strokeFields }).strict(),
  'chat.send': z.object({ type: z.literal('chat.send'), text: z.string().trim().min(1).max(CHAT_MAX_CHARS) }).strict(),
  /** WebRTC signalling, relayed to one participant of the same lesson (full mode only) */
  'rtc.offer': z.object({ type: z.literal('rtc.offer'), to: participantId, sdp: z.string().max(SDP_MAX) }).strict(),
  'rtc.answer': z.object({ type: z.literal('rtc.answer'), to: participantId, sdp: z.string().max(SDP_MAX) }).strict(),
  'rtc.ice': z
    .object({ type: z.literal('rtc.ice'), to: participantId, candidate: z.object({ candidate: z.string().max(4096), sdpMid: z.string().max(64).nullable().optional(), sdpMLineIndex: z.number().int().min(0).max(255).nullable().optional() }) })
    .strict(),
  /** my camera/microphone are on or off (full mode only) */
  'media.state': z.object({ type: z.literal('media.state'), camera: z.boolean(), mic: z.boolean() }).strict(),
  /** teacher: turn off a student's camera and/or microphone */
  'teacher.mute': z
    .object({ type: z.literal('teacher.mute'), participant_id: participantId, camera: z.boolean().default(false), mic: z.boolean().default(false) })
    .strict(),
  /** teacher: allow a student to turn their camera and/or microphone on again (they do it themselves) */
  'teacher.unmute': z
    .object({ type: z.literal('teacher.unmute'), participant_id: participantId, camera: z.boolean().default(false), mic: z.boolean().default(false) })
    .strict(),
  /** teacher: remove a participant; their link cannot re-enter this lesson */
  'teacher.remove': z.object({ type: z.literal('teacher.remove'), participant_id: participantId }).strict(),
} as const;

const C = ClientMessages;
export const ClientMessageSchema = z.discriminatedUnion('type', [
  C['board.op'], C['board.sync'], C['board.stroke'], C['chat.send'], C['rtc.offer'], C['rtc.answer'], C['rtc.ice'], C['media.state'], C['teacher.mute'], C['teacher.unmute'], C['teacher.remove'],
]);
export type ClientMessage = { [K in keyof typeof ClientMessages]: z.infer<(typeof ClientMessages)[K]> }[keyof typeof ClientMessages];

// ---- server -> client ----

export const ParticipantSchema = z.object({
  id: participantId,
  name: z.string(),
  role: z.enum(['teacher', 'student']),
  camera: z.boolean().default(false),
  mic: z.boolean().default(false),
});
export type Participant = z.infer<typeof ParticipantSchema>;

export const MediaStateFields = z.object({
  camera: z.boolean(),
  mic: z.boolean(),
  camera_blocked: z.boolean(),
  mic_blocked: z.boolean(),
  v: z.number().int().min(0),
});
export type MediaState = z.infer<typeof MediaStateFields>;

/**
 * Fields the lesson features add to the gateway's `welcome` (docs/protocol.md):
 * the last chat lines, and in `full` lessons the ICE servers and everyone's
 * camera/microphone state by participant id.
 */
export const WelcomeExtras = z.object({
  chat: z.array(z.lazy(() => ServerMessages.chat)),
  ice_servers: z.array(z.record(z.string(), z.unknown())).optional(),
  media: z.record(z.string(), MediaStateFields).optional(),
});

const sequenced = z.object({ seq: z.number().int().positive(), op: z.unknown(), by: participantId.optional() });

export const ServerMessages = {
  /** board state: full (`full: true`, replaces everything) or the changes after the client's `since` */
  'board.state': z.object({
    type: z.literal('board.state'),
    seq: z.number().int().min(0),
    full: z.boolean(),
    pages: z.array(PageSchema),
    pinned_page_id: IdSchema.nullable(),
    elements: z.array(ElementSchema),
    deleted_ids: z.array(IdSchema),
  }),
  /** operations committed by others, in sequence order */
  'board.ops': z.object({ type: z.literal('board.ops'), ops: z.array(sequenced) }),
  /**
   * my operation was committed at `seq` (null: nothing was left to apply);
   * `skipped`: ids of its elements that lost to a newer version and were not applied
   */
  'board.ack': z.object({ type: z.literal('board.ack'), ref, seq: z.number().int().positive().nullable(), skipped: z.array(IdSchema).optional() }),
  'board.reject': z.object({ type: z.literal('board.reject'), ref, code: z.enum(BOARD_ERROR_CODES), message: z.string() }),
  /** someone's stroke in progress (`by`: their participant id), as they sent it; a board.op commits it */
  'board.stroke': z.object({ type: z.literal('board.stroke'), by: participantId, ...strokeFields }),
  /** the relay lost track: send board.sync with your seq */
  'board.resync': z.object({ type: z.literal('board.resync'), seq: z.number().int().min(0) }),
  chat: z.object({
    type: z.literal('chat'),
    id: z.string(),
    from: ParticipantSchema.pick({ id: true, name: true, role: true }),
    text: z.string(),
    at: z.string(),
  }),
  'rtc.offer': z.object({ type: z.literal('rtc.offer'), from: participantId, sdp: z.string() }),
  'rtc.answer': z.object({ type: z.literal('rtc.answer'), from: participantId, sdp: z.string() }),
  'rtc.ice': z.object({ type: z.literal('rtc.ice'), from: participantId, candidate: ClientMessages['rtc.ice'].shape.candidate }),
  /**
   * someone's camera/microphone state as the gateway holds it (after their own
   * `media.state`, a teacher's mute or unmute). `*_blocked`: the teacher turned
   * it off and has not allowed it again; the gateway then never reports it on.
   * `v` grows with every change of that person: ignore a smaller one.
   */
  'media.state': z.object({ type: z.literal('media.state'), participant_id: participantId, ...MediaStateFields.shape }),
  /** the teacher turned my camera/microphone off (and blocked it until they allow it again) */
  muted: z.object({ type: z.literal('muted'), camera: z.boolean(), mic: z.boolean(), by: z.string() }),
  /** the teacher allows me to turn my camera/microphone on again */
  unmuted: z.object({ type: z.literal('unmuted'), camera: z.boolean(), mic: z.boolean(), by: z.string() }),
} as const;
export type ServerMessage = { [K in keyof typeof ServerMessages]: z.infer<(typeof ServerMessages)[K]> }[keyof typeof ServerMessages];
