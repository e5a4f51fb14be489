import { z } from 'zod';
import { BOARD_ERROR_CODES } from '../../src/board/errors.js';
import { ElementSchema, IdSchema, PageSchema, TombstoneSchema } from '../../src/board/schema.js';
import { LessonModeSchema, RoleSchema, SubjectModeSchema } from '../../src/domain/enums.js';
import { CALL_ID, IceCandidateSchema, PersonIdSchema, strokeFields } from './clientMessages.js';
import { ErrorMessage, errorFrame, type ErrorCode } from './errors.js';

/**
 * Server -> client: every message the gateway sends, core and lesson, one zod
 * schema each. They document the protocol (protocol/describe.ts prints them
 * into docs/protocol.md), the tests check real frames against them, and the
 * page imports their inferred types (ServerMessage) instead of casting.
 */

export const PersonSchema = z.object({
  /** per-lesson public id of a person (not the partner's user id, not linkable across lessons) */
  id: PersonIdSchema,
  name: z.string(),
  role: RoleSchema,
});
export type Person = z.infer<typeof PersonSchema>;

/** A person's camera/microphone as the gateway holds it; `*_blocked`: the teacher turned it off and has not allowed it again. */
export const MediaStateFields = z.object({
  camera: z.boolean(),
  mic: z.boolean(),
  camera_blocked: z.boolean(),
  mic_blocked: z.boolean(),
  v: z.number().int().min(0),
});
export type MediaState = z.infer<typeof MediaStateFields>;

const ChatMessage = z.object({
  type: z.literal('chat'),
  id: z.string(),
  /** from the link, never from the message */
  from: PersonSchema,
  text: z.string(),
  /** ISO time */
  at: z.string(),
});

/** Signals carry the sender's person and connection (call id), and `to_conn` as sent. */
const fromConn = { from: PersonIdSchema, from_conn: z.string().regex(CALL_ID), to_conn: z.string().regex(CALL_ID).optional() };

/** ICE servers for the call (RTCIceServer), TURN credentials included when configured */
const IceServers = z.array(z.object({ urls: z.union([z.string(), z.array(z.string())]), username: z.string().optional(), credential: z.string().optional() }));

export const WelcomeMessage = z.object({
  type: z.literal('welcome'),
  protocol: z.literal(1),
  /** presence sequence: presence events with seq <= this are already reflected in `people` */
  seq: z.number(),
  you: PersonSchema,
  lesson: z.object({ id: z.string(), title: z.string(), mode: LessonModeSchema, subject_mode: SubjectModeSchema }),
  /** everyone present, you included */
  people: z.array(PersonSchema),
  limits: z.object({
    max_payload_bytes: z.number(),
    messages_per_second: z.number(),
    message_burst: z.number(),
    idle_timeout_seconds: z.number(),
    /** GATEWAY_PERSON_CURSORS_PER_SECOND: the page sends its pointer below it */
    cursors_per_second: z.number(),
  }),
  // ---- added by the lesson features ----
  /** the last chat lines, oldest first (chat) */
  chat: z.array(ChatMessage).optional(),
  /** ICE servers for the call, with this participant's TURN credentials when configured (full lessons) */
  ice_servers: IceServers.optional(),
  /** everyone's camera/microphone state by person id (full lessons) */
  media: z.record(z.string(), MediaStateFields).optional(),
  /** this connection's public id in the call; signals name it in `to_conn` (full lessons) */
  call_id: z.string().regex(CALL_ID).optional(),
  /** the teacher everyone follows ("Everyone follow me"), or null */
  lead: PersonIdSchema.nullable().optional(),
});
/** The fields of `welcome` that the lesson features add. */
export const WelcomeExtras = WelcomeMessage.pick({ chat: true, ice_servers: true, media: true, call_id: true, lead: true });

export const PresenceMessage = z.discriminatedUnion('event', [
  z.object({ type: z.literal('presence'), event: z.literal('joined'), person: PersonSchema, seq: z.number(), count: z.number() }),
  z.object({ type: z.literal('presence'), event: z.literal('left'), person: PersonSchema, seq: z.number(), count: z.number() }),
  z.object({ type: z.literal('presence'), event: z.literal('sync'), people: z.array(PersonSchema), seq: z.number(), count: z.number() }),
]);

export const CursorRelayMessage = z.object({
  type: z.literal('cursor'),
  from: PersonIdSchema,
  x: z.number(),
  y: z.number(),
  page: z.string().optional(),
  tool: z.enum(['pointer', 'laser']).optional(),
  button: z.enum(['up', 'down']).optional(),
});

export const PongMessage = z.object({ type: z.literal('pong'), id: z.union([z.string(), z.number()]).optional(), t: z.number() });

const sequenced = z.object({ seq: z.number().int().positive(), op: z.unknown(), by: PersonIdSchema.optional() });
const mediaFlags = { camera: z.boolean(), mic: z.boolean(), by: z.string() };

export const ServerMessages = {
  // ---- gateway core ----
  welcome: WelcomeMessage,
  presence: PresenceMessage,
  cursor: CursorRelayMessage,
  'cursor.leave': z.object({ type: z.literal('cursor.leave'), from: PersonIdSchema }),
  pong: PongMessage,
  error: ErrorMessage,
  // ---- following a view ----
  view: z.object({ type: z.literal('view'), from: PersonIdSchema, page: z.string(), x1: z.number(), y1: z.number(), x2: z.number(), y2: z.number() }),
  follow: z.object({ type: z.literal('follow'), from: PersonIdSchema, to: PersonIdSchema.nullable() }),
  lead: z.object({ type: z.literal('lead'), by: PersonIdSchema.nullable() }),
  /** the partner changed the lesson (PATCH /lessons/{id}): the page shows the new title and toolset */
  'lesson.updated': z.object({ type: z.literal('lesson.updated'), lesson: WelcomeMessage.shape.lesson }),
  // ---- board ----
  'board.state': z.object({
    type: z.literal('board.state'),
    seq: z.number().int().min(0),
    full: z.boolean(),
    pages: z.array(PageSchema),
    pinned_page_id: IdSchema.nullable(),
    elements: z.array(ElementSchema),
    deleted_ids: z.array(IdSchema),
    /** the optional element fields this node keeps (OPTIONAL_ELEMENT_FIELDS); a page sends no other of them */
    optional_fields: z.array(z.string()),
    /** the element types this node keeps (ELEMENT_TYPES; without `image` when FILE_IMAGES is off); a page holds back writes of any other */
    element_types: z.array(z.string()),
  }),
  'board.ops': z.object({ type: z.literal('board.ops'), ops: z.array(sequenced) }),
  'board.ack': z.object({
    type: z.literal('board.ack'),
    ref: z.string(),
    seq: z.number().int().positive().nullable(),
    skipped: z.array(IdSchema).optional(),
    /** a teacher's writes the server stamped one above the stored version: the sender's operation was applied with these stamps */
    restamped: z.array(TombstoneSchema).optional(),
  }),
  'board.reject': z.object({ type: z.literal('board.reject'), ref: z.string(), code: z.enum(BOARD_ERROR_CODES), message: z.string() }),
  'board.stroke': z.object({ type: z.literal('board.stroke'), by: PersonIdSchema, ...strokeFields }),
  'board.resync': z.object({ type: z.literal('board.resync'), seq: z.number().int().min(0) }),
  // ---- chat ----
  chat: ChatMessage,
  // ---- call (full lessons) ----
  'rtc.hello': z.object({ type: z.literal('rtc.hello'), ...fromConn }),
  'rtc.offer': z.object({ type: z.literal('rtc.offer'), ...fromConn, sdp: z.string() }),
  'rtc.answer': z.object({ type: z.literal('rtc.answer'), ...fromConn, sdp: z.string() }),
  'rtc.ice': z.object({ type: z.literal('rtc.ice'), ...fromConn, candidate: IceCandidateSchema }),
  /** fresh TURN credentials, sent every TURN_TTL_SECONDS / 2 while the connection is in the lesson: use them for new connections and ICE restarts */
  'call.ice_servers': z.object({ type: z.literal('call.ice_servers'), ice_servers: IceServers }),
  'rtc.bye': z.object({ type: z.literal('rtc.bye'), from: PersonIdSchema, from_conn: z.string().regex(CALL_ID) }),
  'media.state': z.object({ type: z.literal('media.state'), participant_id: PersonIdSchema, ...MediaStateFields.shape }),
  // ---- teacher actions ----
  muted: z.object({ type: z.literal('muted'), ...mediaFlags }),
  unmuted: z.object({ type: z.literal('unmuted'), ...mediaFlags }),
} as const;

export type ServerMessageType = keyof typeof ServerMessages;
export type ServerMessage = { [K in ServerMessageType]: z.infer<(typeof ServerMessages)[K]> }[ServerMessageType];
/** One server message by its type, e.g. ServerMessageOf<'board.ack'>. */
export type ServerMessageOf<K extends ServerMessageType> = z.infer<(typeof ServerMessages)[K]>;

export { ErrorMessage, errorFrame, type ErrorCode };

export const presenceFrame = (event: 'joined' | 'left', person: Person, seq: number, count: number) =>
  JSON.stringify({ type: 'presence', event, person, seq, count });

export const presenceSyncFrame = (people: Person[], seq: number) =>
  JSON.stringify({ type: 'presence', event: 'sync', people, seq, count: people.length });
