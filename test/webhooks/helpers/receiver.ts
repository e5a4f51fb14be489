import { createServer as createHttpsServer } from 'node:https';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { leafCert, type TestCert } from './tls.js';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  rawBody: Buffer;
  /** parsed body */
  body: { id: number; type: string; created_at: string; data: Record<string, unknown> };
  /** receipt time, ms since the epoch */
  at: number;
  /** the TLS server name (SNI) the client sent; undefined over http or without SNI */
  sni: string | undefined;
  /** resets the TCP connection (RST) under the request */
  reset: () => void;
}

/** Decides the answer to one request (the n-th, from 0); it may write anything, late, or never. */
export type Behaviour = (req: ReceivedRequest, res: ServerResponse, n: number) => void;

export const answer = (status: number, body = ''): Behaviour => (_req, res) => {
  res.writeHead(status, { 'content-type': 'text/plain' }).end(body);
};

export interface Receiver {
  /** base URL, e.g. https://127.0.0.1:1234 (or https://<name>:port when `name` is given) */
  url: string;
  port: number;
  requests: ReceivedRequest[];
  /** resolves when `count` requests have arrived (or rejects after `ms`) */
  waitFor: (count: number, ms?: number) => Promise<ReceivedRequest[]>;
  setBehaviour: (b: Behaviour) => void;
  close: () => Promise<void>;
}

/**
 * A real HTTPS (or HTTP) webhook receiver on loopback, with fault injection by
 * `behaviour`. The request body is read in full before `behaviour` runs.
 */
export async function startReceiver(opts: { behaviour?: Behaviour; name?: string; cert?: TestCert; http?: boolean } = {}): Promise<Receiver> {
  let behaviour = opts.behaviour ?? answer(200, 'ok');
  const requests: ReceivedRequest[] = [];
  const waiters: (() => void)[] = [];
  // TLS sockets cannot send a RST themselves: keep the TCP sockets by client port.
  const raw = new Map<number, import('node:net').Socket>();
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      let body: ReceivedRequest['body'];
      try {
        body = JSON.parse(rawBody.toString('utf8'));
      } catch {
        body = {} as ReceivedRequest['body'];
      }
      const r: ReceivedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, rawBody, body, at: Date.now(),
        sni: ((req.socket as { servername?: string | false }).servername || undefined) as string | undefined,
        reset: () => raw.get(req.socket.remotePort!)?.resetAndDestroy() };
      requests.push(r);
      for (const w of waiters.splice(0)) w();
      behaviour(r, res, requests.length - 1);
    });
  };
  const server: Server = opts.http
    ? createHttpServer(handler)
    : createHttpsServer(opts.cert ?? leafCert([opts.name ?? 'hook.test', '127.0.0.1']), handler);
  const sockets = new Set<import('node:net').Socket>();
  server.on('connection', (s: import('node:net').Socket) => {
    sockets.add(s);
    raw.set(s.remotePort!, s);
    s.on('close', () => {
      sockets.delete(s);
      raw.delete(s.remotePort!);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const scheme = opts.http ? 'http' : 'https';
  return {
    url: `${scheme}://${opts.name ?? '127.0.0.1'}:${port}`,
    port,
    requests,
    setBehaviour: (b) => (behaviour = b),
    waitFor: (count, ms = 10_000) =>
      new Promise((resolve, reject) => {
        const deadline = setTimeout(() => reject(new Error(`expected ${count} requests, got ${requests.length} within ${ms} ms`)), ms);
        const check = () => {
          if (requests.length >= count) {
            clearTimeout(deadline);
            resolve(requests.slice());
          } else waiters.push(check);
        };
        check();
      }),
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
