import { performance } from 'node:perf_hooks';
import uWS from 'uWebSockets.js';
import type { ResolvedLink } from '../src/domain/links.js';
import { checkReadiness } from '../src/lib/readiness.js';
import { refusals, type LinkCheck, type Refusal } from './admission/Admission.js';
import type { ClientConnection, SocketLike } from './ClientConnection.js';
import type { HttpReply } from './features.js';
import type { Gateway } from './Gateway.js';
import { placeholderPage, refusalPage } from './http/embedPage.js';

/**
 * uWS glue, and nothing else: HTTP routes, the upgrade check, and socket
 * events handed to the Gateway. uWS rules followed here: the upgrade request
 * is only readable synchronously, so everything is copied out of it first;
 * a response answered after an await checks onAborted and writes inside
 * res.cork; a socket is never touched after its close event.
 */
interface UserData {
  link?: ResolvedLink;
  ip: string;
  socket?: UwsSocket;
  conn?: ClientConnection;
}

class UwsSocket implements SocketLike {
  closed = false;
  constructor(readonly ws: uWS.WebSocket<UserData>) {}
  send(data: string): number {
    return this.closed ? 2 : this.ws.send(data, false, false);
  }
  end(code: number, reason: string): void {
    if (!this.closed) this.ws.end(code, reason);
  }
  getBufferedAmount(): number {
    return this.closed ? 0 : this.ws.getBufferedAmount();
  }
}

const STATUS: Record<number, string> = {
  200: '200 OK',
  401: '401 Unauthorized',
  403: '403 Forbidden',
  404: '404 Not Found',
  410: '410 Gone',
  429: '429 Too Many Requests',
  500: '500 Internal Server Error',
  503: '503 Service Unavailable',
};

function reply(res: uWS.HttpResponse, r: HttpReply): void {
  res.cork(() => {
    res.writeStatus(STATUS[r.status] ?? `${r.status} Status`);
    for (const [k, v] of Object.entries(r.headers ?? {})) res.writeHeader(k, v);
    res.end(r.body);
  });
}

/** Errors in the API's format: {"detail": {"code", "message"}}. */
function refusalReply(r: Refusal): HttpReply {
  return { status: r.status, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ detail: { code: r.code, message: r.message } }) };
}

/** Answers an HTTP request from a promise, unless the client went away first. */
function later(res: uWS.HttpResponse, work: () => Promise<HttpReply>): void {
  let aborted = false;
  res.onAborted(() => (aborted = true));
  work().then(
    (r) => !aborted && reply(res, r),
    () => !aborted && reply(res, refusalReply(refusals.unavailable)),
  );
}

function clientIp(res: uWS.HttpResponse, forwardedFor: string, trustProxy: boolean): string {
  if (trustProxy && forwardedFor) {
    // the right-most address is the one our own proxy saw
    const hops = forwardedFor.split(',');
    return hops[hops.length - 1].trim();
  }
  return Buffer.from(res.getRemoteAddressAsText()).toString();
}

export function createServer(gw: Gateway): { app: uWS.TemplatedApp; stopAccepting(): void } {
  const { config } = gw.deps;
  const admission = gw.admission;
  const app = uWS.App();
  let accepting = true;
  const topic = (lessonId: string) => `l/${lessonId}`;

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

  app.get('/healthz', (res) => reply(res, { status: 200, headers: { 'content-type': 'application/json' }, body: '{"status":"ok"}' }));
  app.get('/readyz', (res) =>
    later(res, async () => {
      const r = await checkReadiness(gw.deps);
      return { status: r.ready ? 200 : 503, headers: { 'content-type': 'application/json' }, body: JSON.stringify(r) };
    }),
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
  app.get('/embed/:token', (res, req) => {
    const token = req.getParameter(0);
    later(res, async () => {
      const check = await checkLink(token);
      if (!check.ok) return customRefusal ? customRefusal({ token: token ?? '', refusal: check }) : refusalPage(check.status === 410 ? 410 : 401);
      return customPage ? customPage({ link: check.link, token }) : placeholderPage(check.link);
    });
  });

  for (const f of gw.featureList()) {
    for (const route of f.http ?? []) {
      app.get(route.pattern, (res, req) => {
        const headers: Record<string, string> = {};
        req.forEach((k, v) => (headers[k] = v));
        const params: string[] = [];
        for (let i = 0; i < 8; i++) {
          const p = req.getParameter(i);
          if (p === undefined || p === '') break;
          params.push(p);
        }
        const input = { url: req.getUrl(), query: req.getQuery() ?? '', headers, params };
        later(res, async () => route.handle(input));
      });
    }
  }

  app.ws<UserData>('/ws', {
    compression: uWS.DISABLED,
    // frames up to twice the limit reach us and get a 4413; bigger ones are cut by uWS itself
    maxPayloadLength: config.GATEWAY_MAX_PAYLOAD_BYTES * 2,
    maxBackpressure: config.GATEWAY_MAX_BACKPRESSURE_BYTES,
    closeOnBackpressureLimit: 1,
    // uWS counts idle time in 4-second ticks and rounds other values up (9 s
    // closes at ~12 s): a multiple of 4 keeps the close within the setting.
    idleTimeout: Math.max(8, Math.floor(config.GATEWAY_IDLE_TIMEOUT_SECONDS / 4) * 4),
    sendPingsAutomatically: true,

    upgrade(res, req, context) {
      const token = req.getQuery('token');
      const key = req.getHeader('sec-websocket-key');
      const protocol = req.getHeader('sec-websocket-protocol');
      const extensions = req.getHeader('sec-websocket-extensions');
      const origin = req.getHeader('origin') || undefined;
      const ip = clientIp(res, req.getHeader('x-forwarded-for'), config.GATEWAY_TRUST_PROXY);
      if (!accepting) return reply(res, refusalReply(refusals.unavailable));
      if (!admission.originAllowed(origin)) return reply(res, refusalReply(refusals.origin));
      if (!admission.reserveIp(ip)) return reply(res, refusalReply(refusals.perIp));
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
        admission.releaseIp(ip);
      });
      const t0 = performance.now();
      checkLink(token).then(
        (check) => {
          if (gw.log.isLevelEnabled('debug')) gw.log.debug({ check_ms: +(performance.now() - t0).toFixed(2) }, 'link checked');
          if (aborted) return;
          if (!check.ok || !accepting) {
            admission.releaseIp(ip);
            return reply(res, refusalReply(check.ok ? refusals.unavailable : check));
          }
          res.cork(() => res.upgrade<UserData>({ link: check.link, ip }, key, protocol, extensions, context));
        },
        (err) => {
          gw.log.warn({ err: (err as Error).message }, 'link check failed');
          if (aborted) return;
          admission.releaseIp(ip);
          reply(res, refusalReply(refusals.unavailable));
        },
      );
    },

    open(ws) {
      const ud = ws.getUserData();
      ud.socket = new UwsSocket(ws);
      ud.conn = gw.open(ud.socket, ud.link!, ud.ip);
      ud.link = undefined;
    },

    message(ws, message, isBinary) {
      const ud = ws.getUserData();
      if (ud.conn) gw.message(ud.conn, message, isBinary);
    },

    close(ws) {
      const ud = ws.getUserData();
      if (ud.socket) ud.socket.closed = true;
      admission.releaseIp(ud.ip);
      if (ud.conn) gw.closed(ud.conn);
    },
  });

  return {
    app,
    stopAccepting() {
      accepting = false;
    },
  };
}

export function listen(app: uWS.TemplatedApp, host: string, port: number): Promise<uWS.us_listen_socket> {
  return new Promise((resolve, reject) => {
    app.listen(host, port, (s) => (s ? resolve(s) : reject(new Error(`gateway cannot listen on ${host}:${port}`))));
  });
}
