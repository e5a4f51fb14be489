import { performance } from 'node:perf_hooks';
import uWS from 'uWebSockets.js';
import type { ResolvedLink } from '../src/domain/links.js';
import { checkReadiness } from '../src/lib/readiness.js';
import { refusals, type LinkCheck, type Refusal } from './admission/Admission.js';
import { chooseCap, ConnectionCap, readProcLimits } from './admission/ConnectionCap.js';
import type { ClientConnection, SocketLike } from './ClientConnection.js';
import type { HttpReply } from './features/api.js';
import type { Gateway } from './Gateway.js';
import { FileService } from './features/files/service.js';
import { NotesService } from './features/notes/service.js';
import { notFoundPage, placeholderPage, refusalPage } from './http/embedPage.js';
import { isUpgradeHandshake, notAHandshake, upgradeAfterCheck } from './http/upgrade.js';

/**
 * uWS glue, and nothing else: HTTP routes, the upgrade check, and socket
 * events handed to the Gateway. uWS rules followed here: the upgrade request
 * is only readable synchronously, so everything is copied out of it first;
 * a response answered after an await checks onAborted and writes inside
 * res.cork, except an upgrade after the link check (http/upgrade.ts: a uWS
 * v20.30 bug); a socket is never touched after its close event.
 */
interface UserData {
  link?: ResolvedLink;
  ip: string;
  /** performance.now() when the upgrade request arrived */
  upgradeAt?: number;
  /** the page says it shows images (`&images=1`); a page of a release before images does not */
  images?: boolean;
  socket?: UwsSocket;
  conn?: ClientConnection;
}

class UwsSocket implements SocketLike {
  closed = false;
  /** when the client last sent anything (a frame or a pong), on the Keepalive's coarse clock */
  rxAt = 0;
  /** when the Keepalive last pinged it (a silent socket is pinged once per cycle, not at every visit) */
  pingAt = -Infinity;
  constructor(readonly ws: uWS.WebSocket<UserData>) {}
  send(data: string): number {
    return this.closed ? 2 : this.ws.send(data, false, false);
  }
  cork(fn: () => void): void {
    // outside a uWS callback (after an await) every send is a write of its own; corked, they are one
    if (this.closed) fn();
    else this.ws.cork(fn);
  }
  end(code: number, reason: string): void {
    if (!this.closed) this.ws.end(code, reason);
  }
  getBufferedAmount(): number {
    return this.closed ? 0 : this.ws.getBufferedAmount();
  }
}

/** How often the keepalive wakes up to ping a slice of the sockets. */
const KEEPALIVE_TICK_MS = 50;

/**
 * Protocol pings spread evenly over time, instead of uWS's own
 * (sendPingsAutomatically), which go out in its 4-second timer sweep: at
 * 20,000 sockets about 6,000 sends at once, a 90-215 ms stall of the event
 * loop every 4 s. Every socket is visited once per `cycleMs` (a slice every
 * tick) and pinged when it sent nothing since the visit before; its pong (or
 * any frame) is data received, which restarts uWS's idle timeout. A socket
 * that answers nothing is closed by that timeout as before: the pings only
 * keep live sockets open. With cycleMs = (idle - 4 s) / 3, a live socket's
 * answer arrives within 2 cycles of its last frame, at least one cycle before
 * the earliest moment uWS could close it (idle - 4 s, its tick).
 */
class Keepalive {
  /** coarse clock (ms), advanced every tick: no clock read per frame */
  now = performance.now();
  private readonly sockets = new Set<UwsSocket>();
  private cursor: Iterator<UwsSocket> = this.sockets.values();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly cycleMs: number) {}

  /** The longest a live socket goes without a frame or a pong: two cycles and a tick. */
  get liveSilenceMs(): number {
    return 2 * this.cycleMs + KEEPALIVE_TICK_MS;
  }

  add(s: UwsSocket): void {
    s.rxAt = this.now;
    this.sockets.add(s);
    this.timer ??= setInterval(() => this.tick(), KEEPALIVE_TICK_MS).unref();
  }

  remove(s: UwsSocket): void {
    this.sockets.delete(s);
  }

  /** An open socket of this node, if any (closed ones are removed at their close event). */
  anyOpen(): UwsSocket | undefined {
    for (const s of this.sockets) if (!s.closed) return s;
    return undefined;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    const now = performance.now();
    const elapsed = now - this.now;
    this.now = now;
    // A share of the sockets per tick, sized by the time since the last tick (capped at one pass):
    // a node short of CPU gets its ticks late, and a share sized for 50 ms made a pass take longer
    // than the idle timeout, so uWS closed live sockets with 1006 (bench/gateway/starve.mjs).
    // A Set iterator skips deleted sockets and visits added ones: each socket once per pass.
    let quota = Math.min(this.sockets.size, Math.ceil((this.sockets.size * Math.max(elapsed, KEEPALIVE_TICK_MS)) / this.cycleMs));
    while (quota-- > 0) {
      let it = this.cursor.next();
      if (it.done) {
        this.cursor = this.sockets.values();
        it = this.cursor.next();
        if (it.done) return;
      }
      const s = it.value;
      // Silent for a cycle and not pinged within one: on a lightly loaded node the pass wraps at
      // every tick (one socket, quota 1), and without pingAt a silent socket got a ping every tick.
      if (!s.closed && this.now - Math.max(s.rxAt, s.pingAt) >= this.cycleMs - KEEPALIVE_TICK_MS) {
        s.pingAt = this.now;
        s.ws.ping();
      }
    }
  }
}

const STATUS: Record<number, string> = {
  200: '200 OK',
  201: '201 Created',
  304: '304 Not Modified',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  403: '403 Forbidden',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  409: '409 Conflict',
  410: '410 Gone',
  411: '411 Length Required',
  413: '413 Payload Too Large',
  415: '415 Unsupported Media Type',
  422: '422 Unprocessable Entity',
  429: '429 Too Many Requests',
  500: '500 Internal Server Error',
  503: '503 Service Unavailable',
};

/**
 * Writes a reply; to a HEAD request the same status and headers, and the length of the body it
 * would have had. `close`: end the connection after it (no keep-alive).
 */
function reply(res: uWS.HttpResponse, r: HttpReply, head = false, close = false): void {
  // uWS.js counts a response ended by endWithoutBody as unanswered and would abort the process when the handler returns
  if (head) res.onAborted(() => undefined);
  res.cork(() => {
    res.writeStatus(STATUS[r.status] ?? `${r.status} Status`);
    for (const [k, v] of Object.entries(r.headers ?? {})) res.writeHeader(k, v);
    if (head) res.endWithoutBody(typeof r.body === 'string' ? Buffer.byteLength(r.body) : r.body.byteLength, close);
    else res.end(r.body, close);
  });
}

/** Errors in the API's format: {"detail": {"code", "message"}}. */
function refusalReply(r: Refusal, headers: Record<string, string> = {}): HttpReply {
  return { status: r.status, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ detail: { code: r.code, message: r.message } }) };
}

/** Seconds a client refused by a full node waits before it tries again (the load balancer meanwhile sees /readyz 503). */
const FULL_RETRY_AFTER_S = 2;
/** A full node's refusal: 503 `unavailable` with Retry-After, closing the connection so its descriptor is freed at once. */
const fullReply = refusalReply(refusals.unavailable, { 'retry-after': String(FULL_RETRY_AFTER_S) });

/** Answers an HTTP request from a promise, unless the client went away first. */
function later(res: uWS.HttpResponse, work: () => Promise<HttpReply>, head = false): void {
  let aborted = false;
  res.onAborted(() => (aborted = true));
  work().then(
    (r) => !aborted && reply(res, r, head),
    () => !aborted && reply(res, refusalReply(refusals.unavailable), head),
  );
}

/** A request to /ws that is no handshake uWS can complete (no valid Sec-WebSocket-Key): uWS passes it on to the fallback route. */
const noKey: Refusal = { ok: false, status: 400, code: 'bad_request', message: 'Not a WebSocket handshake: Sec-WebSocket-Key is missing or malformed' };
const notAllowed = (): HttpReply => ({
  status: 405,
  headers: { 'content-type': 'application/json', allow: 'GET, HEAD' },
  body: JSON.stringify({ detail: { code: 'method_not_allowed', message: 'The gateway answers GET and HEAD only' } }),
});

function clientIp(res: uWS.HttpResponse, forwardedFor: string, trustProxy: boolean): string {
  if (trustProxy && forwardedFor) {
    // the right-most address is the one our own proxy saw
    const hops = forwardedFor.split(',');
    return hops[hops.length - 1].trim();
  }
  return Buffer.from(res.getRemoteAddressAsText()).toString();
}

export function createServer(gw: Gateway): { app: uWS.TemplatedApp; stopAccepting(): void; stop(): void } {
  const { config } = gw.deps;
  const admission = gw.admission;
  const app = uWS.App();
  let accepting = true;
  const idleTimeout = gw.timing.idleTimeoutS;
  const keepalive = new Keepalive(gw.timing.keepaliveCycleMs);
  const capChoice = chooseCap(
    config.GATEWAY_MAX_CONNECTIONS,
    config.DATABASE_POOL_SIZE + config.DATABASE_READ_POOL_SIZE,
    config.GATEWAY_MAX_CONNECTIONS > 0 ? undefined : readProcLimits(),
  );
  const cap = new ConnectionCap(capChoice.max);
  gw.metrics.connectionCap(cap.max);
  gw.log.info({ max_connections: cap.max, from: capChoice.from }, 'connection cap');
  const refuse = (res: uWS.HttpResponse, r: Refusal, reason: string) => {
    gw.metrics.upgradeRefused(reason);
    reply(res, refusalReply(r));
  };
  const topic = (lessonId: string) => `l/${lessonId}`;
  /** A pong, or a ping of the client's own: the socket is alive (the keepalive's clock and the gateway's). */
  const signOfLife = (ws: uWS.WebSocket<UserData>) => {
    const ud = ws.getUserData();
    if (ud.socket) ud.socket.rxAt = keepalive.now;
    if (ud.conn) gw.pong(ud.conn);
  };

  gw.useFanout({
    subscribe(conn) {
      const s = conn.socket as UwsSocket;
      if (!s.closed) s.ws.subscribe(topic(conn.lessonId));
    },
    publish(lessonId, frame, except) {
      const s = except?.socket as UwsSocket | undefined;
      // publishing from a socket skips that socket
      if (s && !s.closed && except!.state === 'present') s.ws.publish(topic(lessonId), frame, false, false);
      else app.publish(topic(lessonId), frame, false, false);
    },
  });

  /** Every page and file answers HEAD as it answers GET (docs/protocol.md, "HTTP paths"). */
  const getAndHead = (pattern: string, handler: (res: uWS.HttpResponse, req: uWS.HttpRequest, head: boolean) => void) => {
    app.get(pattern, (res, req) => handler(res, req, false));
    app.head(pattern, (res, req) => handler(res, req, true));
  };

  getAndHead('/healthz', (res, _req, head) => reply(res, { status: 200, headers: { 'content-type': 'application/json' }, body: '{"status":"ok"}' }, head));
  getAndHead('/readyz', (res, _req, head) =>
    later(
      res,
      async () => {
        // draining: 503 at once, so the proxy's health check stops sending new arrivals here
        if (!accepting || gw.isDraining) return { status: 503, headers: { 'content-type': 'application/json' }, body: '{"ready":false,"draining":true}' };
        // full (the connection cap): the same, until a socket here closes
        if (cap.full) return { status: 503, headers: { 'content-type': 'application/json' }, body: '{"ready":false,"full":true}' };
        const r = await checkReadiness(gw.deps);
        return { status: r.ready ? 200 : 503, headers: { 'content-type': 'application/json' }, body: JSON.stringify(r) };
      },
      head,
    ),
  );

  const customPage = gw.featureList().find((f) => f.embedPage)?.embedPage;
  const customRefusal = gw.featureList().find((f) => f.refusalPage)?.refusalPage;
  const admits = gw.featureList().filter((f) => f.admit);
  /** The link check, then the features' (a participant removed by the teacher). */
  const checkLink = async (token: string | undefined): Promise<LinkCheck> => {
    const check = await admission.checkLink(token);
    if (!check.ok) return check;
    for (const f of admits) {
      const refusal = await f.admit!(check.link);
      if (refusal) return refusal;
    }
    return check;
  };
  const customNotFound = gw.featureList().find((f) => f.notFoundPage)?.notFoundPage;
  const notFound = async (path: string): Promise<HttpReply> => (customNotFound ? customNotFound({ path }) : notFoundPage());
  getAndHead('/embed/:token', (res, req, head) => {
    const token = req.getParameter(0);
    const url = req.getUrl();
    later(
      res,
      async () => {
        // `/embed/` (no token) is a page that does not exist, not a refused link
        if (!token) return notFound(url);
        const check = await checkLink(token);
        if (!check.ok) return customRefusal ? customRefusal({ token, refusal: check }) : refusalPage(check.status === 410 ? 410 : 401);
        return customPage ? customPage({ link: check.link, token }) : placeholderPage(check.link);
      },
      head,
    );
  });

  for (const f of gw.featureList()) {
    for (const route of f.http ?? []) {
      getAndHead(route.pattern, (res, req, head) => {
        const headers: Record<string, string> = {};
        req.forEach((k, v) => (headers[k] = v));
        const params: string[] = [];
        for (let i = 0; i < 8; i++) {
          const p = req.getParameter(i);
          if (p === undefined || p === '') break;
          params.push(p);
        }
        const input = { url: req.getUrl(), query: req.getQuery() ?? '', headers, params };
        later(res, async () => route.handle(input), head);
      });
    }
  }

  // Files on the board (features/files/service.ts): the body is read here, at most FILE_MAX_BYTES of it;
  // an upload cut off before its end is dropped whole (nothing reaches the store)
  const files = new FileService(gw.deps, checkLink);
  app.post('/files/:lesson', (res, req) => {
    const lessonId = req.getParameter(0) ?? '';
    const headers: Record<string, string> = {};
    req.forEach((k, v) => (headers[k] = v));
    let aborted = false;
    let chunks: Buffer[] = [];
    let size = 0;
    res.onAborted(() => {
      aborted = true;
      chunks = [];
    });
    if (Number(headers['content-length'] ?? 0) > files.maxBytes) return reply(res, files.tooLarge(), false, true);
    let done = false;
    res.onData((chunk, isLast) => {
      if (done || aborted) return;
      size += chunk.byteLength;
      if (size > files.maxBytes) {
        done = true;
        chunks = [];
        return reply(res, files.tooLarge(), false, true);
      }
      // uWS reuses the chunk's memory after this callback: copied
      chunks.push(Buffer.from(chunk.slice(0)));
      if (!isLast) return;
      done = true;
      const body = Buffer.concat(chunks, size);
      chunks = [];
      files.upload({ lessonId, headers, body }).then(
        (r) => !aborted && reply(res, r),
        () => !aborted && reply(res, refusalReply(refusals.unavailable)),
      );
    });
  });
  getAndHead('/files/:lesson/:file', (res, req, head) => {
    const headers: Record<string, string> = {};
    req.forEach((k, v) => (headers[k] = v));
    const lessonId = req.getParameter(0) ?? '';
    const fileId = req.getParameter(1) ?? '';
    later(res, () => files.serve({ lessonId, fileId, headers }, head), head);
  });

  // The board as a PDF for the page's "Download notes (PDF)" (features/notes/service.ts)
  const notes = new NotesService(gw.deps, checkLink);
  getAndHead('/notes/:lesson', (res, req, head) => {
    const headers: Record<string, string> = {};
    req.forEach((k, v) => (headers[k] = v));
    const lessonId = req.getParameter(0) ?? '';
    later(res, () => notes.serve({ lessonId, headers }, head), head);
  });

  // Whatever no route above took: uWS would drop the connection without an answer.
  app.any('/*', (res, req) => {
    const method = req.getMethod();
    const url = req.getUrl();
    const head = method === 'head';
    // the WebSocket route passes on a request without a valid key
    if (url === '/ws') return reply(res, refusalReply(noKey), head);
    if (method !== 'get' && !head) return reply(res, notAllowed());
    later(res, () => notFound(url), head);
  });

  app.ws<UserData>('/ws', {
    compression: uWS.DISABLED,
    // frames up to twice the limit reach us and get a 4413; bigger ones are cut by uWS itself
    maxPayloadLength: config.GATEWAY_MAX_PAYLOAD_BYTES * 2,
    maxBackpressure: config.GATEWAY_MAX_BACKPRESSURE_BYTES,
    closeOnBackpressureLimit: 1,
    idleTimeout,
    // our Keepalive sends the pings, spread over time
    sendPingsAutomatically: false,

    upgrade(res, req, context) {
      const token = req.getQuery('token');
      const images = req.getQuery('images') === '1';
      const key = req.getHeader('sec-websocket-key');
      const protocol = req.getHeader('sec-websocket-protocol');
      const extensions = req.getHeader('sec-websocket-extensions');
      const origin = req.getHeader('origin') || undefined;
      const connection = req.getHeader('connection');
      const ip = clientIp(res, req.getHeader('x-forwarded-for'), config.GATEWAY_TRUST_PROXY);
      if (!isUpgradeHandshake(connection)) return refuse(res, notAHandshake, 'not_handshake');
      if (!accepting || gw.isDraining) return refuse(res, refusals.unavailable, 'draining');
      // before anything that costs: a full node refuses at once and frees the descriptor
      if (!cap.take()) {
        gw.metrics.upgradeRefused('full');
        return reply(res, fullReply, false, true);
      }
      if (!admission.originAllowed(origin)) {
        cap.release();
        return refuse(res, refusals.origin, 'origin');
      }
      if (!admission.reserveIp(ip)) {
        cap.release();
        return refuse(res, refusals.perIp, 'per_ip');
      }
      // the node's slot and the address's, held until the socket closes or the upgrade ends here
      const release = () => {
        admission.releaseIp(ip);
        cap.release();
      };
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
        release();
      });
      const t0 = performance.now();
      checkLink(token).then(
        (check) => {
          if (gw.log.isLevelEnabled('debug')) gw.log.debug({ check_ms: +(performance.now() - t0).toFixed(2) }, 'link checked');
          if (aborted) return;
          if (!check.ok || !accepting || gw.isDraining) {
            release();
            return check.ok ? refuse(res, refusals.unavailable, 'draining') : refuse(res, check, check.code);
          }
          upgradeAfterCheck(res, keepalive.anyOpen()?.ws, () => res.upgrade<UserData>({ link: check.link, ip, upgradeAt: t0, images }, key, protocol, extensions, context));
        },
        (err) => {
          gw.log.warn({ err: (err as Error).message }, 'link check failed');
          if (aborted) return;
          release();
          refuse(res, refusals.unavailable, 'unavailable');
        },
      );
    },

    open(ws) {
      const ud = ws.getUserData();
      ud.socket = new UwsSocket(ws);
      keepalive.add(ud.socket);
      ud.conn = gw.open(ud.socket, ud.link!, ud.ip, ud.upgradeAt);
      ud.conn.showsImages = !!ud.images;
      ud.link = undefined;
    },

    message(ws, message, isBinary) {
      const ud = ws.getUserData();
      if (ud.socket) ud.socket.rxAt = keepalive.now;
      if (ud.conn) gw.message(ud.conn, message, isBinary);
    },

    pong: signOfLife,
    // a client's own ping (uWS answers it) is a sign of life too, as it is for uWS's idle timeout
    ping: signOfLife,

    close(ws, code) {
      const ud = ws.getUserData();
      let late = false;
      if (ud.socket) {
        ud.socket.closed = true;
        keepalive.remove(ud.socket);
        // Closed without a close frame after answering nothing for longer than a live socket can
        // stay silent (its pong comes within two cycles of its last frame): uWS's idle timeout
        // found a dead or half-open socket late. The departure is dated at its last sign of life.
        late = code === 1006 && performance.now() - ud.socket.rxAt > keepalive.liveSilenceMs;
      }
      admission.releaseIp(ud.ip);
      cap.release();
      if (ud.conn) gw.closed(ud.conn, late, code);
    },
  });

  return {
    app,
    stopAccepting() {
      accepting = false;
    },
    stop() {
      keepalive.stop();
    },
  };
}

export function listen(app: uWS.TemplatedApp, host: string, port: number): Promise<uWS.us_listen_socket> {
  return new Promise((resolve, reject) => {
    app.listen(host, port, (s) => (s ? resolve(s) : reject(new Error(`gateway cannot listen on ${host}:${port}`))));
  });
}
