import net from 'node:net';
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

  it('reads the upgrade answer and frames of every length kind when they arrive one byte per read', async () => {
    // a raw server, so the split points are ours: every byte is written on its own and flushed
    const frame = (text: string) => {
      const body = Buffer.from(text);
      const n = body.length;
      const head = n < 126 ? Buffer.from([0x81, n]) : n < 65536 ? Buffer.from([0x81, 126, n >> 8, n & 0xff]) : Buffer.concat([Buffer.from([0x81, 127]), Buffer.alloc(4), Buffer.from([n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff])]);
      return Buffer.concat([head, body]);
    };
    const texts = ['a', 'b'.repeat(125), 'c'.repeat(126), 'd'.repeat(65_536)];
    const bytes = Buffer.concat([Buffer.from('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'), ...texts.map(frame)]);
    const server = net.createServer((s) => {
      s.setNoDelay(true);
      s.once('data', async () => {
        // the header and the first frames a byte at a time, the long frame in 1,000-byte reads
        const slow = bytes.length - 65_546;
        for (let i = 0; i < slow; i++) {
          s.write(bytes.subarray(i, i + 1));
          await new Promise((r) => setImmediate(r));
        }
        for (let i = slow; i < bytes.length; i += 1000) {
          s.write(bytes.subarray(i, Math.min(i + 1000, bytes.length)));
          await new Promise((r) => setImmediate(r));
        }
      });
    });
    const rawPort = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as net.AddressInfo).port)));
    try {
      const got: string[] = [];
      const errors: Error[] = [];
      const ws = new LeanWebSocket(`ws://127.0.0.1:${rawPort}/ws`, '127.0.0.1', { message: (t) => got.push(t), refused: () => undefined, error: (e) => errors.push(e), close: () => undefined });
      await eventually(async () => got.length >= texts.length, 'the four frames');
      expect(ws.readyState).toBe(OPEN);
      expect(got).toEqual(texts);
      expect(errors).toEqual([]);
      ws.close();
    } finally {
      server.close();
    }
  });
});
