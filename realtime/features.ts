import type { Deps } from '../src/deps.js';
import type { ResolvedLink } from '../src/domain/links.js';
import type { Refusal } from './admission/Admission.js';
import type { LocalPerson } from './admission/LocalPeople.js';
import type { ClientConnection } from './ClientConnection.js';
import type { MessageDef } from './protocol/registry.js';

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
  /** One person's sockets in the lesson on this node and their shared budgets (admission/LocalPeople.ts). */
  localPerson(lessonId: string, personId: string): LocalPerson | undefined;
  /** Connections present in the lesson on this node. */
  localConnections(lessonId: string): ClientConnection[];
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
  messages?: MessageDef<any>[];
  /** Extra top-level fields of `welcome` for this participant, e.g. `{ board: {...} }`. */
  welcome?(ctx: FeatureContext): Promise<Record<string, unknown>> | Record<string, unknown>;
  /** After the participant got `welcome` and counts as present. */
  onPresent?(ctx: FeatureContext): void | Promise<void>;
  /** After the connection closed (the person may still be present through another tab). */
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
