import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { builtWeb } from '../board/web.js';
import { startTestGateway } from './helpers/gateway.js';
import { lessonWithLinks } from './helpers/fixtures.js';

/**
 * Every path of the gateway answers with a status (docs/protocol.md, "HTTP
 * paths"), `/`, `/embed`, unknown paths and every HEAD included (uWS drops a
 * request no route takes), and an upgrade without Sec-WebSocket-Key. The real gateway with the built page.
 */
const gw = await startTestGateway({ env: { WEB_DIR: builtWeb() } });

interface Raw {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** the socket was still open after the answer (keep-alive), i.e. nothing was dropped */
  open: boolean;
}

/**
 * One request written by hand on a fresh socket; resolves the parsed answer (never a dropped
 * connection) once it is whole (its headers, and its Content-Length of body unless HEAD; an
 * upgrade's first frame), after a further 100 ms that would show the socket closed; rejects
 * when no whole answer came in 5 s (a 1.5 MB asset served while the machine is busy can take
 * far longer than a fixed wait).
 */
function raw(method: string, path: string, headers = ''): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const s = net.connect(gw.port, '127.0.0.1');
    let got = Buffer.alloc(0);
    let closed = false;
    let settling: ReturnType<typeof setTimeout> | undefined;
    if (process.env.DEBUG_RAW) console.error('RAW', method, path, JSON.stringify(headers));
    const parse = () => {
      const text = got.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return undefined;
      const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
      const h: Record<string, string> = {};
      for (const l of lines) h[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
      const body = got.subarray(end + 4);
      const status = Number(statusLine.split(' ')[1]);
      // an upgrade's body is the socket's first frames: whole once the first has come
      const whole = method === 'HEAD' || (status === 101 ? body.length > 0 : h['content-length'] !== undefined ? body.length >= Number(h['content-length']) : closed);
      return whole ? { status, headers: h, body: body.toString('utf8') } : undefined;
    };
    const finish = () => {
      clearTimeout(deadline);
      const answer = parse();
      s.destroy();
      if (answer) resolve({ ...answer, open: !closed });
      else reject(new Error(`no answer to ${method} ${path} (connection ${closed ? 'dropped' : 'silent'})`));
    };
    const check = () => {
      if (!settling && parse()) settling = setTimeout(finish, 100);
    };
    s.on('connect', () => s.write(`${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}\r\n`));
    s.on('data', (d) => {
      got = Buffer.concat([got, d]);
      check();
    });
    s.on('close', () => {
      closed = true;
      check();
    });
    s.on('error', reject);
    const deadline = setTimeout(finish, 5000);
  });
}

describe('every gateway path answers GET and HEAD with a status', () => {
  it('answers the 404 card for /, /embed, /embed/ and unknown paths, and HEAD with the same status, headers and length but no body', async () => {
    for (const path of ['/', '/embed', '/embed/', '/nope', '/embed/abc/def', '/web', '/web/assets', '/favicon.ico']) {
      const get = await raw('GET', path);
      expect(get.status, `GET ${path}`).toBe(404);
      expect(get.headers['content-type'], path).toBe('text/html; charset=utf-8');
      expect(get.headers['cache-control'], path).toBe('no-store');
      expect(get.body, path).toContain('There is no page here');
      expect(get.open, path).toBe(true);
      const head = await raw('HEAD', path);
      expect(head.status, `HEAD ${path}`).toBe(404);
      expect(head.headers['content-type'], path).toBe(get.headers['content-type']);
      expect(Number(head.headers['content-length']), path).toBe(Buffer.byteLength(get.body));
      expect(head.body, path).toBe('');
      expect(head.open, path).toBe(true);
    }
  });

  it('answers HEAD of the page, its assets, an unknown asset and the health checks as GET does', async () => {
    const f = await lessonWithLinks(gw.deps.sql);
    const token = await f.link('s1');
    const page = await raw('GET', `/embed/${token}`);
    expect(page.status).toBe(200);
    const js = /src="(\/web\/assets\/app-[^"]+\.js)"/.exec(page.body)![1];
    const cases: [string, number][] = [
      [`/embed/${token}`, 200],
      ['/embed/not-a-real-token', 401],
      [js, 200],
      ['/web/assets/missing-0000.js', 404],
      ['/web/assets/../../etc/passwd', 404],
      ['/healthz', 200],
      ['/readyz', 200],
    ];
    for (const [path, status] of cases) {
      const get = await raw('GET', path);
      const head = await raw('HEAD', path);
      expect([get.status, head.status], path).toEqual([status, status]);
      expect(head.headers['content-type'], path).toBe(get.headers['content-type']);
      expect(Number(head.headers['content-length']), path).toBe(Buffer.byteLength(get.body));
      expect(head.body, path).toBe('');
      expect(head.open, path).toBe(true);
    }
    // the card of an unknown link, not the 404 one
    expect((await raw('GET', '/embed/not-a-real-token')).body).toContain('This link does not work');
  });

  it('answers other methods with 405 and Allow: GET, HEAD', async () => {
    for (const [method, path] of [['POST', '/'], ['PUT', '/embed/x'], ['DELETE', '/web/assets/a.js'], ['POST', '/healthz']]) {
      const r = await raw(method, path, 'Content-Length: 0\r\n');
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.headers.allow).toBe('GET, HEAD');
      expect(JSON.parse(r.body)).toEqual({ detail: { code: 'method_not_allowed', message: 'The gateway answers GET and HEAD only' } });
    }
  });
});

describe('a request to /ws that is not a complete handshake', () => {
  const refused = { detail: { code: 'bad_request', message: 'Not a WebSocket handshake: Sec-WebSocket-Key is missing or malformed' } };

  it('gets 400 without Sec-WebSocket-Key, with a malformed one, and as a plain GET or HEAD', async () => {
    const f = await lessonWithLinks(gw.deps.sql);
    const token = await f.link('s1');
    const upgrade = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n';
    for (const headers of [upgrade, `${upgrade}Sec-WebSocket-Key: short\r\n`, `${upgrade}Sec-WebSocket-Key: \r\n`, '']) {
      const r = await raw('GET', `/ws?token=${token}`, headers);
      expect(r.status, JSON.stringify(headers)).toBe(400);
      expect(JSON.parse(r.body)).toEqual(refused);
    }
    expect((await raw('HEAD', `/ws?token=${token}`)).status).toBe(400);
    // and a proper handshake with the same link is still welcomed
    const ok = await raw('GET', `/ws?token=${token}`, `${upgrade}Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n`);
    expect(ok.status).toBe(101);
    expect(ok.body).toContain('"type":"welcome"');
  });
});
