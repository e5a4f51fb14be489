import uWS from 'uWebSockets.js';
import { afterAll, describe, expect, it } from 'vitest';
import { CLOSED, type LeanHandlers, LeanWebSocket, OPEN } from '../../bench/gateway/leanClient.js';
import { eventually } from '../helpers/wait.js';

/**
 * The load test's own WebSocket client (bench/gateway/leanClient.ts) against a real uWebSockets.js
 * server: its figures are only as true as its frames. What a hand-written client gets wrong shows
 * here: a long frame split over TCP reads, the server's pings (uWS closes a socket that leaves them
 * unanswered), masking (uWS closes on an unmasked client frame), close codes, a refused upgrade.
 */
const pongs: string[] = [];
const app = uWS.App();
app.ws<{ q: string }>('/ws', {
  maxPayloadLength: 1 << 20,
  upgrade(res, req, ctx) {
    const q = req.getQuery() ?? '';
    if (q.includes('refuse')) {
      res.writeStatus('503 Service Unavailable').end('full');
      return;
    }
    res.upgrade({ q }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), ctx);
  },
  open(ws) {
    ws.send('hello', false);
    ws.send('x'.repeat(70_000), false); // a 64-bit length, over several TCP reads
    ws.send('é'.repeat(200), false); // a 16-bit length, not ASCII
    ws.ping('are you there');
  },
  pong(_ws, message) {
    pongs.push(Buffer.from(message).toString());
  },
  message(ws, data) {
    const text = Buffer.from(data).toString();
    if (text === 'bye') ws.end(4001, 'bye');
    else ws.send(`echo:${text}`, false);
  },
});
const port = await new Promise<number>((resolve, reject) =>
  app.listen('127.0.0.1', 0, (s) => (s ? resolve(uWS.us_socket_local_port(s)) : reject(new Error('listen failed')))),
);
afterAll(() => app.close());

function connect(query = '') {
  const got: string[] = [];
  let refused: number | undefined;
  const errors: Error[] = [];
  let resolveClose!: (code: number) => void;
  const closed = new Promise<number>((r) => (resolveClose = r));
  const on: LeanHandlers = {
    message: (t) => got.push(t),
    refused: (s) => (refused = s),
    error: (e) => errors.push(e),
    close: resolveClose,
  };
  const ws = new LeanWebSocket(`ws://127.0.0.1:${port}/ws${query}`, '127.0.0.1', on);
  return { ws, got, closed, errors, refused: () => refused };
}

describe('the load test client (leanClient)', () => {
  it('reads long and split frames whole, answers pings, and its masked frames are accepted', async () => {
    const c = connect();
    await eventually(async () => c.got.length >= 3, 'the three frames');
    expect(c.ws.readyState).toBe(OPEN);
    expect(c.got[0]).toBe('hello');
    expect(c.got[1]).toBe('x'.repeat(70_000));
    expect(c.got[2]).toBe('é'.repeat(200));
    await eventually(async () => pongs.includes('are you there'), 'the pong');
    c.ws.send('short');
    c.ws.send('y'.repeat(300));
    c.ws.send('z'.repeat(70_000));
    await eventually(async () => c.got.length >= 6, 'the echoes');
    expect(c.got.slice(3)).toEqual(['echo:short', `echo:${'y'.repeat(300)}`, `echo:${'z'.repeat(70_000)}`]);
    c.ws.close(1000);
    expect(await c.closed).toBe(1000);
    expect(c.ws.readyState).toBe(CLOSED);
    expect(c.errors).toEqual([]);
  });

  it("reports the server's close code", async () => {
    const c = connect();
    await eventually(async () => c.got.length >= 1, 'the first frame');
    c.ws.send('bye');
    expect(await c.closed).toBe(4001);
  });

  it('reports a refused upgrade by its status, and no close', async () => {
    const c = connect('?refuse=1');
    await eventually(async () => c.refused() !== undefined, 'the refusal');
    expect(c.refused()).toBe(503);
    expect(c.ws.readyState).toBe(CLOSED);
    const early = await Promise.race([c.closed, new Promise((r) => setTimeout(() => r('none'), 200))]);
    expect(early).toBe('none');
  });
});
