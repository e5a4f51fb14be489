import type { ClientMessage } from '../../../realtime/protocol/clientMessages.js';
import type { ServerMessage } from '../../../realtime/protocol/serverMessages.js';

/**
 * The page's socket to the gateway: `/ws?token=` on the page's own origin,
 * JSON text frames, automatic reconnection with jittered exponential backoff
 * (0.5 s doubling to 10 s). Close codes that mean "do not come back"
 * (docs/protocol.md: 4401 link expired/unknown, 4403 removed, 4409 replaced by a newer tab of the
 * same person, 4410 archived)
 * end the connection for good and show an error view. 1012 (the node is draining before a
 * restart) reconnects at once, without backoff.
 *
 * A browser never learns why an upgrade was refused (the socket just closes, 1006), so after
 * PROBE_AFTER failed attempts in a row each further one asks the page's own address: 401, 403 or
 * 410 there is the link's end (expired, removed, deleted) and ends the connection with that view;
 * no answer at all is the network, and the page keeps retrying, however long, with what the
 * person drew meanwhile still on the page (it is sent once the socket is back). The page never
 * reloads itself: a reload while offline lands on the browser's error page and loses that work.
 */
export type ConnState =
  | { kind: 'connecting'; attempt: number }
  | { kind: 'open' }
  | { kind: 'reconnecting'; attempt: number; inMs: number }
  | { kind: 'ended'; reason: EndReason };

export type EndReason = 'expired' | 'removed' | 'replaced' | 'archived';

// 4409: this person opened more tabs than the gateway keeps (GATEWAY_MAX_SOCKETS_PER_PERSON) and this
// one is the oldest; reconnecting would close the newest in turn, so the tabs would take turns forever.
const FINAL: Record<number, EndReason> = { 4401: 'expired', 4403: 'removed', 4409: 'replaced', 4410: 'archived' };
/** 1012 "service restart": the gateway node is draining; reconnect at once (to another node). */
const RESTARTING = 1012;
/** Reconnection attempts in a row that never opened before each further one asks the page's address what is wrong. */
const PROBE_AFTER = 2;
/** The page's own address answers these for a link that can no longer enter (docs/protocol.md, `GET /embed/<token>`). */
const REFUSED: Record<number, EndReason> = { 401: 'expired', 403: 'removed', 410: 'archived' };

export interface ConnectionEvents {
  state(s: ConnState): void;
  /** a frame of the catalogue's server messages: switch on `type` to narrow it */
  message(msg: ServerMessage): void;
}

/**
 * The server's message types. Typed by the catalogue, so a type the gateway
 * gains is a compile error here until the page decides what to do with it.
 * The page does not bundle the zod schemas (they would add their code to the
 * page for a check the gateway's tests already make against the same schemas):
 * a frame is trusted to match its type once its `type` is one of these.
 */
const SERVER_TYPES: Record<ServerMessage['type'], true> = {
  welcome: true, presence: true, cursor: true, 'cursor.leave': true, pong: true, error: true, view: true, follow: true, lead: true, 'lesson.updated': true,
  'board.state': true, 'board.ops': true, 'board.ack': true, 'board.reject': true, 'board.stroke': true, 'board.resync': true,
  chat: true, 'call.ice_servers': true, 'rtc.hello': true, 'rtc.offer': true, 'rtc.answer': true, 'rtc.ice': true, 'rtc.bye': true, 'media.state': true, muted: true, unmuted: true,
};

function isServerMessage(x: unknown): x is ServerMessage {
  return typeof x === 'object' && x !== null && 'type' in x && typeof x.type === 'string' && Object.hasOwn(SERVER_TYPES, x.type);
}

export class Connection {
  private ws: WebSocket | null = null;
  private attempt = 0;
  private failedInARow = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private ended = false;

  constructor(
    private readonly url: string,
    private readonly on: ConnectionEvents,
    /** the page's own address (`/embed/<token>`), asked what is wrong when upgrades keep failing */
    private readonly pageUrl: string,
  ) {}

  /** The socket URL: the path the gateway put in the page (`<meta name="lesson-socket">`), on the page's own host. */
  static forToken(token: string, on: ConnectionEvents): Connection {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const socketPath = document.querySelector<HTMLMetaElement>('meta[name="lesson-socket"]')?.content || '/ws?token=';
    // `images=1`: this page shows image elements (a node leaves them out for a page of a release before them)
    return new Connection(`${proto}//${location.host}${socketPath}${encodeURIComponent(token)}&images=1`, on, location.href.split('#')[0]);
  }

  start(): void {
    this.open();
    window.addEventListener('online', () => this.retryNow());
  }

  /** Sends a message; false when the socket is not open (the caller keeps it for after the resync). */
  send(msg: ClientMessage): boolean {
    if (this.ws?.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(msg));
    return true;
  }

  retryNow(): void {
    if (this.ended || this.ws) return;
    if (this.timer) clearTimeout(this.timer);
    this.open();
  }

  private open(): void {
    this.timer = null;
    this.attempt++;
    this.on.state({ kind: 'connecting', attempt: this.attempt });
    const ws = new WebSocket(this.url);
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.failedInARow = 0;
      this.attempt = 0;
      this.on.state({ kind: 'open' });
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data !== 'string') return;
      let msg: unknown;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        return; // not JSON: ignore
      }
      if (isServerMessage(msg)) this.on.message(msg);
    };
    ws.onclose = (ev) => {
      this.ws = null;
      const final = FINAL[ev.code];
      if (final) return this.end(final);
      if (ev.code === RESTARTING && opened) {
        // the node is draining (docs/protocol.md, 1012): reconnect at once; the proxy picks a node
        // that still accepts. The gateway already spread its closes over DRAIN_SECONDS.
        this.attempt = 0;
        this.on.state({ kind: 'reconnecting', attempt: 0, inMs: 0 });
        this.timer = setTimeout(() => this.open(), 0);
        return;
      }
      // The upgrade keeps failing: the link may have expired, or the lesson been deleted, meanwhile
      if (!opened && ++this.failedInARow >= PROBE_AFTER) void this.probe();
      const inMs = Math.min(10_000, 500 * 2 ** Math.min(this.attempt, 5)) * (0.75 + Math.random() * 0.5);
      this.on.state({ kind: 'reconnecting', attempt: this.attempt, inMs });
      this.timer = setTimeout(() => this.open(), inMs);
    };
  }

  /** Asks the page's address whether the link can still enter; ends the connection if it cannot. */
  private async probe(): Promise<void> {
    let status: number;
    try {
      status = (await fetch(this.pageUrl, { cache: 'no-store', credentials: 'omit' })).status;
    } catch {
      return; // no answer: the network (or the whole service) is away; keep retrying
    }
    const reason = REFUSED[status];
    if (!reason || this.ended || this.ws?.readyState === WebSocket.OPEN) return;
    if (this.ws) {
      // an attempt on its way meanwhile: it would be refused the same
      this.ws.onclose = null;
      this.ws.close();
      this.ws = null;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.end(reason);
  }

  private end(reason: EndReason): void {
    this.ended = true;
    this.on.state({ kind: 'ended', reason });
  }
}
