import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/net.js';
import { spawnService } from '../helpers/process.js';
import { answer, startReceiver } from './helpers/receiver.js';
import { eventually } from '../helpers/wait.js';
import { attemptsOf, deliveryOf, startWebhookStack } from './helpers/stack.js';

describe('several dispatchers on one database', () => {
  it('two dispatchers at once share the work and send every event exactly once', async () => {
    const stack = await startWebhookStack({ env: { WEBHOOK_PARTNER_CONCURRENCY: '2', WEBHOOK_CONCURRENCY: '8' } });
    const [d1, d2] = await Promise.all([stack.dispatcher(), stack.dispatcher()]);
    const rx = await startReceiver({ behaviour: (_r, res) => setTimeout(() => res.writeHead(200).end(), 5) });
    const partners = await Promise.all(Array.from({ length: 6 }, () => stack.partnerWithWebhook(rx.url)));
    const ids: number[] = [];
    for (let i = 0; i < 25; i++) {
      for (const p of partners) ids.push((await stack.record(p.partner.id)).id);
    }
    await rx.waitFor(ids.length, 20_000);
    await eventually(async () => {
      const [r] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE state = 'delivered'`;
      return r.n === ids.length;
    });
    await new Promise((r) => setTimeout(r, 300));
    const delivered = rx.requests.map((r) => Number(r.headers['x-whiteboard-delivery']));
    expect(delivered).toHaveLength(ids.length);
    expect(new Set(delivered)).toEqual(new Set(ids));
    const byDispatcher = await stack.sql<{ dispatcher: number; n: number }[]>`
      SELECT dispatcher, count(*)::int AS n FROM webhook_attempts GROUP BY dispatcher ORDER BY dispatcher`;
    expect(byDispatcher.map((r) => r.dispatcher).sort()).toEqual([d1.id, d2.id].sort());
    expect(byDispatcher.reduce((s, r) => s + r.n, 0)).toBe(ids.length);
    await rx.close();
  });

  it('a dispatcher process killed mid-delivery loses nothing: while it lives nobody else sends its attempt; once dead, another retries it with the same event id', async () => {
    const stack = await startWebhookStack({ env: { WEBHOOK_ALLOW_HOSTS: '127.0.0.1' } });
    // plain http keeps the child process free of test-only TLS trust (allowed hosts may use http)
    const rx = await startReceiver({ http: true, behaviour: (req, res, n) => (n === 0 ? undefined : answer(200)(req, res, n)) });
    const p = await stack.partnerWithWebhook(`${rx.url}/in`);
    const port = await freePort();
    const child = await spawnService({ ...stack.env, ROLES: 'api,dispatcher', API_PORT: String(port), WEBHOOK_TIMEOUT_MS: '10000' }, `http://127.0.0.1:${port}/readyz`);
    const ev = await stack.record(p.partner.id, 'participant.joined', { lesson_id: 'l', external_id: null, role: 'student', name: 'Ann' });
    const [first] = await rx.waitFor(1, 15_000); // the child is now waiting for an answer that never comes
    const claimedBy = (await deliveryOf(stack.sql, ev.id)).claimed_by;
    expect(claimedBy).not.toBeNull();

    // takes over once the dead dispatcher's attempt has surely ended: WEBHOOK_TIMEOUT_MS after the claim
    const survivor = await stack.dispatcher({ env: { WEBHOOK_TIMEOUT_MS: '2000' } });
    await new Promise((r) => setTimeout(r, 500)); // five polls of the survivor
    expect(rx.requests).toHaveLength(1);

    await child.stop('SIGKILL');
    const [, second] = await rx.waitFor(2, 5_000);
    expect(second.headers['x-whiteboard-delivery']).toBe(String(ev.id));
    expect(second.rawBody.equals(first.rawBody)).toBe(true);
    const d = await eventually(async () => { const x = await deliveryOf(stack.sql, ev.id); return x.state === 'delivered' && x; });
    expect(d.attempts).toBe(1); // the killed attempt was retried as attempt 1, not counted twice
    const log = await attemptsOf(stack.sql, ev.id);
    expect(log).toEqual([expect.objectContaining({ attempt: 1, delivered: true, dispatcher: survivor.id })]);
    await rx.close();
  });

  it('one dead partner endpoint does not delay other partners: it gets at most WEBHOOK_PARTNER_CONCURRENCY attempts at once', async () => {
    // The dead endpoint holds each attempt for 10 s: the fast partner's deliveries arriving within 5 s
    // show they did not wait for a slot (margin for a loaded machine, not a speed target).
    const stack = await startWebhookStack({ env: { WEBHOOK_PARTNER_CONCURRENCY: '2', WEBHOOK_TIMEOUT_MS: '10000' } });
    await stack.dispatcher();
    const dead = await startReceiver({ behaviour: () => {} });
    const alive = await startReceiver();
    const slow = await stack.partnerWithWebhook(dead.url);
    const fast = await stack.partnerWithWebhook(alive.url);
    for (let i = 0; i < 30; i++) await stack.record(slow.partner.id);
    await dead.waitFor(2);
    const started = Date.now();
    for (let i = 0; i < 5; i++) await stack.record(fast.partner.id);
    await alive.waitFor(5, 5000);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(dead.requests).toHaveLength(2);
    await Promise.all([dead.close(), alive.close()]);
  });
});
