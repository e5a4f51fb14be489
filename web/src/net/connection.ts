/**
 * The page's socket to the gateway: `/ws?token=` on the page's own origin,
 * JSON text frames, automatic reconnection with jittered exponential backoff
 * (0.5 s doubling to 10 s). Close codes that mean "do not come back"
 * (docs/protocol.md: 4401 link expired/unknown, 4403 removed, 4409 replaced by a newer tab of the
 * same person, 4410 archived)
 * end the connection for good and show an error view.
 */
export type ConnState =
  | { kind: 'connecting'; attempt: number }
  | { kind: 'open' }
  | { kind: 'reconnecting'; attempt: number; inMs: number }
  | { kind: 'ended'; reason: EndReason };

export type EndReason = 'expired' | 'removed' | 'replaced' | 'archived' | 'unreachable';

// 4409: this person opened more tabs than the gateway keeps (GATEWAY_MAX_SOCKETS_PER_PERSON) and this
// one is the oldest; reconnecting would close the newest in turn, so the tabs would take turns forever.
const FINAL: Record<number, EndReason> = { 4401: 'expired', 4403: 'removed', 4409: 'replaced', 4410: 'archived' };
/** Reconnection attempts that never opened before the page asks the server what is wrong (it reloads: the gateway then serves the error page). */
const MAX_FAILED = 8;

export interface ConnectionEvents {
  state(s: ConnState): void;
  message(msg: { type: string; [k: string]: unknown }): void;
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
  ) {}

  /** The socket URL: the path the gateway put in the page (`<meta name="lesson-socket">`), on the page's own host. */
  static forToken(token: string, on: ConnectionEvents): Connection {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const socketPath = document.querySelector<HTMLMetaElement>('meta[name="lesson-socket"]')?.content || '/ws?token=';
    return new Connection(`${proto}//${location.host}${socketPath}${encodeURIComponent(token)}`, on);
  }

  start(): void {
    this.open();
    window.addEventListener('online', () => this.retryNow());
  }

  /** Sends a message; false when the socket is not open (the caller keeps it for after the resync). */
  send(msg: object): boolean {
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
      try {
        const msg = JSON.parse(ev.data);
        if (msg && typeof msg.type === 'string') this.on.message(msg);
      } catch {
        /* not JSON: ignore */
      }
    };
    ws.onclose = (ev) => {
      this.ws = null;
      const final = FINAL[ev.code];
      if (final) return this.end(final);
      if (!opened && ++this.failedInARow >= MAX_FAILED) {
        // The upgrade keeps failing: the link may have expired or the lesson been archived.
        // Reloading lets the gateway answer /embed/<token> with the right error page.
        location.reload();
        return this.end('unreachable');
      }
      const inMs = Math.min(10_000, 500 * 2 ** Math.min(this.attempt, 5)) * (0.75 + Math.random() * 0.5);
      this.on.state({ kind: 'reconnecting', attempt: this.attempt, inMs });
      this.timer = setTimeout(() => this.open(), inMs);
    };
  }

  private end(reason: EndReason): void {
    this.ended = true;
    this.on.state({ kind: 'ended', reason });
  }
}
