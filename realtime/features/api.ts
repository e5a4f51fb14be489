import type { GatewayMetrics } from '../../src/metrics/gateway.js';
import type { Deps } from '../../src/deps.js';
import type { ResolvedLink } from '../../src/domain/links.js';
import type { Refusal } from '../admission/Admission.js';
import type { Envelope } from '../bus/LessonBus.js';
import type { ClientConnection } from '../ClientConnection.js';
import type { Lesson, LocalPerson } from '../lesson/Lesson.js';
import type { CloseCodeName } from '../protocol/closeCodes.js';
import type { Presence } from '../presence/Presence.js';
import type { z } from 'zod';
import type { MessageDef } from '../protocol/registry.js';

/** What message handlers and features may do with the gateway. */
export interface GatewayApi {
  readonly deps: Deps;
  readonly nodeId: string;
  /**
   * Sends a frame (a JSON string, or an object to stringify) to everyone
   * present in the lesson on every node. `except` skips one local connection
   * (usually the sender); `exceptPerson` skips every socket of that person
   * (by public id) on this node (other nodes skip them for `cursor` frames,
   * by their `from`). `ephemeral` frames (cursors) may be skipped for nodes
   * that just joined the lesson; the rest always reach every node.
   */
  broadcast(lessonId: string, frame: string | object, opts?: { except?: ClientConnection; exceptPerson?: string; ephemeral?: boolean }): void;
  /** One person's sockets in the lesson on this node and their shared budgets (lesson/Lesson.ts). */
  localPerson(lessonId: string, personId: string): LocalPerson | undefined;
  /** Connections present in the lesson on this node. */
  localConnections(lessonId: string): ClientConnection[];
  /** The lesson on this node, while it has sockets here. */
  lesson(lessonId: string): Lesson | undefined;
  /** Sends a frame to one person's sockets in the lesson, on every node. */
  toPerson(lessonId: string, personId: string, frame: string): void;
  /** Closes one person's sockets in the lesson, on every node (and those about to be admitted here). */
  closePerson(lessonId: string, personId: string, code: CloseCodeName): void;
  /** A feature's envelope to the other nodes with the lesson open (received by their `onBus`). */
  publish(lessonId: string, kind: string, payload: string): void;
  /** Who is in which lesson across nodes (read-only use by features). */
  readonly presence: Presence;
  /** deps.clock in ms */
  now(): number;
  /** the gateway's Prometheus families (a no-op set when metrics are off) */
  readonly metrics: GatewayMetrics;
}

/** What a message handler gets: the sender (present in its lesson) and the gateway's public face. */
export interface MessageContext {
  conn: ClientConnection;
  gateway: GatewayApi;
  /** ms of the injected clock when the frame arrived */
  now: number;
}

/** An inbound message type of the gateway: its schema and handler (protocol/registry.ts). */
export type GatewayMessage<S extends z.ZodType = z.ZodType> = MessageDef<S, MessageContext>;

export function defineMessage<S extends z.ZodType>(def: GatewayMessage<S>): GatewayMessage<S> {
  return def;
}

export interface FeatureContext {
  conn: ClientConnection;
  link: ResolvedLink;
  gateway: GatewayApi;
}

/** An HTTP route on the gateway port (pages and assets of the participant UI). */
export interface HttpRoute {
  method: 'get';
  /** uWS pattern, e.g. "/assets/*" or "/board/:id" */
  pattern: string;
  handle(req: { url: string; params: string[]; headers: Record<string, string>; query: string }): Promise<HttpReply> | HttpReply;
}

export interface HttpReply {
  status: number;
  headers?: Record<string, string>;
  body: string | Buffer;
}

/**
 * The plug-in point of the board phase (docs/protocol.md, "Extending").
 * A feature adds message types, fields of `welcome`, reactions to people
 * arriving and leaving, HTTP routes, and may replace the participant page.
 */
export interface GatewayFeature {
  name: string;
  messages?: GatewayMessage<any>[];
  /** The gateway the feature serves, once, when the gateway is built. */
  attach?(gateway: GatewayApi): void;
  /**
   * Before the gateway serves (Gateway.start), e.g. LISTEN for what the
   * feature caches; a rejection fails the start. `close` undoes it.
   */
  start?(): Promise<void>;
  /**
   * The lesson opened on this node (its first socket), after its bus channel
   * is subscribed; no socket of it gets `welcome` before this settles. A
   * rejection closes the lesson's waiting sockets with 4503.
   */
  onLessonOpen?(lesson: Lesson): Promise<void> | void;
  /** The lesson's last socket here closed; its state goes with it. */
  onLessonClose?(lesson: Lesson): void;
  /** Envelopes of the feature's own kinds from other nodes (e.g. `board`). */
  onBus?: Record<string, (lesson: Lesson, e: Envelope) => void>;
  /**
   * The last point to refuse an arrival, by closing its connection
   * (`ctx.conn.close(...)`): after the lesson opened here and before the
   * participant registers in presence, so a refused person is never heard of
   * by the others, never counts towards a session and is never announced
   * (participant.joined). A rejection closes the connection with 4503. Keep it
   * synchronous in the common case: every arrival waits for it.
   */
  beforePresence?(ctx: FeatureContext): Promise<void> | void;
  /**
   * Extra top-level fields of `welcome` for this participant, e.g. `{ board: {...} }`.
   * Called once the lesson is open here, in the same tick as the participant's
   * presence registration: a Redis read issued at once goes out in the
   * registration's write and comes back in its round trip. It may not refuse
   * the arrival (that is beforePresence).
   */
  welcome?(ctx: FeatureContext): Promise<Record<string, unknown>> | Record<string, unknown>;
  /** After the participant got `welcome` and counts as present. */
  onPresent?(ctx: FeatureContext): void | Promise<void>;
  /**
   * After the connection closed and presence heard of it (the person may still
   * be present through another tab). Called once for every connection that
   * got this far, on every path: at once, or when a departure Redis missed is
   * retried, or at shutdown (personLeft false) if Redis never came back.
   */
  onClosed?(ctx: FeatureContext & { personLeft: boolean }): void | Promise<void>;
  http?: HttpRoute[];
  /** The participant page for a valid link (GET /embed/<token>); the placeholder page otherwise. */
  embedPage?(ctx: { link: ResolvedLink; token: string }): Promise<HttpReply> | HttpReply;
  /**
   * Refuses a link the gateway found valid (e.g. its person was removed from
   * the lesson), at the WebSocket upgrade and at GET /embed/<token>.
   */
  admit?(link: ResolvedLink): Promise<Refusal | undefined> | Refusal | undefined;
  /** The page for a refused link at GET /embed/<token>; a plain text page otherwise. */
  refusalPage?(ctx: { token: string; refusal: Refusal }): Promise<HttpReply> | HttpReply;
  /** The 404 page for a path no route serves (`/`, `/embed/`, a mistyped link); a plain text page otherwise. */
  notFoundPage?(ctx: { path: string }): Promise<HttpReply> | HttpReply;
  /** The gateway is stopping and every socket is closed: release what the feature holds. */
  close?(): Promise<void>;
}
