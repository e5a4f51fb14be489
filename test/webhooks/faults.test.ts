import { describe, expect, it } from 'vitest';
import type { ServerResponse } from 'node:http';
import { ManualClock } from '../../src/lib/clock.js';
import { MAX_RESPONSE_BYTES } from '../../src/webhooks/sender.js';
import { verifyWebhookSignature } from '../../src/webhooks/verify.js';
import { freePort } from '../helpers/net.js';
import { answer, startReceiver, type Behaviour } from './helpers/receiver.js';
import { eventually } from '../helpers/wait.js';
import { attemptsOf, deliveryOf, startWebhookStack } from './helpers/stack.js';

/** Fault injection against real loopback receivers; attempts are limited to 600 ms in total. */
const TIMEOUT_MS = 600;
/**
 * How late past TIMEOUT_MS an attempt may end: a loaded 2-core machine runs timers late by a second
 * and more. Still far from what a time-out that never fired would give (the drips below last 10 s).
 */
const LATE_MS = 2_000;
const clock = new ManualClock(Date.now());
const stack = await startWebhookStack({ clock, env: { WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) } });
const dispatcher = await stack.dispatcher();

async function firstAttempt(behaviour: Behaviour) {
  const rx = await startReceiver({ behaviour });
  const p = await stack.partnerWithWebhook(rx.url);
  const ev = await stack.record(p.partner.id);
  const [a] = await eventually(async () => {
    const log = await attemptsOf(stack.sql, ev.id);
    return log.length > 0 && log;
  });
  const d = await eventually(async () => { const x = await deliveryOf(stack.sql, ev.id); return x.claimed_by === null && x; });
  return { rx, p, ev, a, d };
}

/** Writes `chunk` until the client goes away (at most `maxBytes`). */
function endless(status: number, maxBytes = 256 * 1024 * 1024): Behaviour {
  return (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/octet-stream' });
    const chunk = Buffer.alloc(64 * 1024, 97);
    let sent = 0;
    const pump = () => {
      while (!res.destroyed && sent < maxBytes) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      if (!res.destroyed) res.end();
    };
    pump();
  };
}

/** Sends one byte every 50 ms, for at most `ms`. */
function drip(res: ServerResponse | import('node:net').Socket, ms: number, byte = 'a'): void {
  const started = Date.now();
  const t = setInterval(() => {
    if (res.destroyed || Date.now() - started > ms) {
      clearInterval(t);
      if (!res.destroyed) res.end();
      return;
    }
    res.write(byte);
  }, 50);
}

describe('delivery outcomes under faults', () => {
  it('retries a 5xx after 30 s with the same id and body and a new signature, then counts the 2xx as delivered', async () => {
    const { rx, p, ev, a, d } = await firstAttempt((_req, res, n) => (n === 0 ? answer(503, 'busy')(_req, res, n) : answer(200)(_req, res, n)));
    expect(a).toMatchObject({ attempt: 1, status_code: 503, delivered: false });
    expect(d.state).toBe('pending');
    expect(d.next_attempt_at!.getTime() - clock.now().getTime()).toBe(30_000);
    clock.advance(30_000);
    dispatcher.wake();
    const [first, second] = await rx.waitFor(2);
    expect(second.headers['x-whiteboard-delivery']).toBe(String(ev.id));
    expect(second.rawBody.equals(first.rawBody)).toBe(true);
    const t1 = verifyWebhookSignature(first.rawBody, first.headers['x-whiteboard-signature'], p.secret, { now: clock.now().getTime() });
    const t2 = verifyWebhookSignature(second.rawBody, second.headers['x-whiteboard-signature'], p.secret, { now: clock.now().getTime() });
    expect(t1.ok && t2.ok && t2.timestamp - t1.timestamp).toBe(30);
    expect(second.headers['x-whiteboard-signature']).not.toBe(first.headers['x-whiteboard-signature']);
    await eventually(async () => (await deliveryOf(stack.sql, ev.id)).state === 'delivered');
    expect((await attemptsOf(stack.sql, ev.id)).map((x) => [x.attempt, x.status_code, x.delivered])).toEqual([[1, 503, false], [2, 200, true]]);
    await rx.close();
  });

  it('fails an attempt at the total time-out when the receiver never answers', async () => {
    const { rx, a, d } = await firstAttempt(() => {});
    expect(a).toMatchObject({ error: 'timeout', status_code: null, delivered: false });
    expect(a.duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(a.duration_ms).toBeLessThan(TIMEOUT_MS + LATE_MS);
    expect(d.state).toBe('pending');
    await rx.close();
  });

  it('fails at the total time-out a 2xx whose body drips in byte by byte (inactivity timers alone would never fire)', async () => {
    const { rx, a } = await firstAttempt((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      drip(res, 10_000);
    });
    expect(a).toMatchObject({ error: 'timeout', status_code: 200, delivered: false });
    expect(a.duration_ms).toBeLessThan(TIMEOUT_MS + LATE_MS);
    await rx.close();
  });

  it('fails at the total time-out a response whose status line and headers drip in', async () => {
    const { rx, a } = await firstAttempt((req, res) => {
      const socket = res.socket!;
      socket.write('HTTP/1.1 200 OK\r\n');
      drip(socket, 10_000, 'X-Slow: a\r\n');
      void req;
    });
    expect(a).toMatchObject({ error: 'timeout', delivered: false });
    expect(a.duration_ms).toBeLessThan(TIMEOUT_MS + LATE_MS);
    await rx.close();
  });

  it('fails an attempt whose connection is reset', async () => {
    const { rx, a } = await firstAttempt((req) => req.reset());
    expect(a).toMatchObject({ error: 'connection_reset', status_code: null, delivered: false });
    await rx.close();
  });

  it('fails an attempt whose connection is refused', async () => {
    const port = await freePort();
    const p = await stack.partnerWithWebhook(`https://127.0.0.1:${port}/`);
    const ev = await stack.record(p.partner.id);
    const [a] = await eventually(async () => { const l = await attemptsOf(stack.sql, ev.id); return l.length > 0 && l; });
    expect(a).toMatchObject({ error: 'connection_refused', delivered: false });
  });

  it('treats a 3xx as a failure and never follows the redirect', async () => {
    const target = await startReceiver();
    const { rx, a } = await firstAttempt((_req, res) => res.writeHead(302, { location: `${target.url}/elsewhere` }).end());
    expect(a).toMatchObject({ status_code: 302, delivered: false, error: null });
    // a later delivery to the target itself: had the redirect been followed, it would have arrived first
    const probe = await stack.partnerWithWebhook(target.url);
    await stack.record(probe.partner.id);
    const [first] = await target.waitFor(1);
    expect(first.path).not.toBe('/elsewhere');
    expect(target.requests).toHaveLength(1);
    await Promise.all([rx.close(), target.close()]);
  });

  it('reads only a capped part of an endless 2xx body and counts it as delivered well before the time-out', async () => {
    const { rx, a, d } = await firstAttempt(endless(200));
    expect(MAX_RESPONSE_BYTES).toBeLessThanOrEqual(64 * 1024);
    expect(a).toMatchObject({ status_code: 200, delivered: true, error: null });
    expect(a.duration_ms).toBeLessThan(TIMEOUT_MS);
    expect(d.state).toBe('delivered');
    await rx.close();
  });

  it('fails a 5xx with an endless body at once, by its status', async () => {
    const { rx, a } = await firstAttempt(endless(500));
    expect(a).toMatchObject({ status_code: 500, delivered: false, error: null });
    expect(a.duration_ms).toBeLessThan(TIMEOUT_MS);
    await rx.close();
  });
});
