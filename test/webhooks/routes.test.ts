import { SPEC_EVENT_TYPES } from '../../src/events/outbox.js';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import { recordEvent } from '../../src/events/outbox.js';
import { ManualClock } from '../../src/lib/clock.js';
import { startApi } from '../../src/server.js';
import { startDispatcher } from '../../src/webhooks/index.js';
import { buildWebhookRuntime } from '../../src/webhooks/runtime.js';
import { SecretBox } from '../../src/webhooks/secrets.js';
import { verifyWebhookSignature } from '../../src/webhooks/verify.js';
import { makeDeps } from '../helpers/deps.js';
import { partnerFactory } from '../helpers/factories.js';
import { answer, startReceiver } from './helpers/receiver.js';
import { testCa } from './helpers/tls.js';
import { eventually } from '../helpers/wait.js';
import { deliveryOf, loopbackResolver, startWebhookStack } from './helpers/stack.js';
import { apiError } from '../helpers/api.js';

const clock = new ManualClock(Date.now());
const stack = await startWebhookStack({ clock });
const dispatcher = await stack.dispatcher();
const { api } = stack;
/** the real stripe-node: its constructEvent verifies our signatures (the scheme is Stripe's) */
const stripe = new Stripe('sk_test_unused');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Moves the clock and lets the dispatcher look. */
async function advance(ms: number) {
  clock.advance(ms);
  dispatcher.wake();
  await sleep(150);
}

describe('PUT /webhook', () => {
  it('answers {url, secret} with a new whsec_ secret of at least 192 random bits on every call, stored sealed', async () => {
    const p = await partnerFactory(stack.sql);
    const url = 'https://hook.test:8443/in?a=1';
    const first = await api.request('PUT', '/webhook', { key: p.apiKey, body: { url } });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ url, secret: expect.stringMatching(/^whsec_[0-9A-Za-z]{43}$/), enabled_events: [...SPEC_EVENT_TYPES] });
    const second = await api.request('PUT', '/webhook', { key: p.apiKey, body: { url } });
    expect(second.body.secret).not.toBe(first.body.secret);
    const [row] = await stack.sql<{ secret: string; url: string }[]>`SELECT url, secret FROM webhooks WHERE partner_id = ${p.partner.id}`;
    expect(row.url).toBe(url);
    expect(row.secret).toMatch(/^gcm1\.[0-9a-f]{8}\./);
    expect(row.secret).not.toContain(second.body.secret.slice(6));
  });

  it('applies a changed URL and secret to every attempt made after the change', async () => {
    const a = await startReceiver({ behaviour: answer(500) });
    const b = await startReceiver();
    const p = await stack.partnerWithWebhook(a.url);
    const ev = await stack.record(p.partner.id);
    await a.waitFor(1);
    await eventually(async () => (await deliveryOf(stack.sql, ev.id)).attempts === 1);
    const put = await api.request('PUT', '/webhook', { key: p.apiKey, body: { url: `${b.url}/new` } });
    await advance(30_000);
    const [req] = await b.waitFor(1);
    expect(req.path).toBe('/new');
    expect(req.headers['x-whiteboard-delivery']).toBe(String(ev.id));
    const now = clock.now().getTime();
    expect(verifyWebhookSignature(req.rawBody, req.headers['x-whiteboard-signature'], put.body.secret, { now }).ok).toBe(true);
    expect(verifyWebhookSignature(req.rawBody, req.headers['x-whiteboard-signature'], p.secret, { now }).ok).toBe(false);
    expect(a.requests).toHaveLength(1);
    await Promise.all([a.close(), b.close()]);
  });
});

describe('secret rotation with overlap: PUT /webhook {rotate: true}, GET /webhook', () => {
  it('signs with the new and the previous secret for the overlap (stripe-node verifies with either), then with the new one only', async () => {
    const receiver = await startReceiver();
    const p = await stack.partnerWithWebhook(receiver.url);
    expect((await api.request('GET', '/webhook', { key: p.apiKey })).body).toEqual({
      url: receiver.url, created_at: expect.any(String), updated_at: expect.any(String), rotation: null, enabled_events: [...SPEC_EVENT_TYPES],
    });
    const put = await api.request('PUT', '/webhook', { key: p.apiKey, body: { url: receiver.url, rotate: true } });
    expect(put.status).toBe(200);
    const [previous, current] = [p.secret, put.body.secret as string];
    const until = new Date(clock.now().getTime() + 24 * 3600_000).toISOString();
    const state = await api.request('GET', '/webhook', { key: p.apiKey });
    expect(state.body).toEqual({ url: receiver.url, created_at: expect.any(String), updated_at: clock.now().toISOString(), rotation: { previous_secret_expires_at: until }, enabled_events: [...SPEC_EVENT_TYPES] });
    expect(state.text).not.toContain('whsec_');

    // during the overlap: `t=..,v1=<new>,v1=<old>`; the real stripe package's constructEvent accepts either secret
    const ev = await stack.record(p.partner.id);
    const [req] = await receiver.waitFor(1);
    const header = req.headers['x-whiteboard-signature'] as string;
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    const receivedAt = clock.now().getTime();
    for (const secret of [current, previous]) {
      expect(stripe.webhooks.constructEvent(req.rawBody, header, secret, 300, undefined, receivedAt)).toMatchObject({ id: ev.id, type: 'lesson.started' });
      expect(verifyWebhookSignature(req.rawBody, header, secret, { now: receivedAt }).ok).toBe(true);
    }
    expect(() => stripe.webhooks.constructEvent(req.rawBody, header, 'whsec_other', 300, undefined, receivedAt)).toThrow();

    // after the overlap: the previous secret no longer signs, and GET shows no rotation
    await advance(24 * 3600_000);
    const ev2 = await stack.record(p.partner.id);
    const [, req2] = await receiver.waitFor(2);
    expect(req2.body.id).toBe(ev2.id);
    const header2 = req2.headers['x-whiteboard-signature'] as string;
    expect(header2).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    const later = clock.now().getTime();
    expect(stripe.webhooks.constructEvent(req2.rawBody, header2, current, 300, undefined, later)).toMatchObject({ id: ev2.id });
    expect(() => stripe.webhooks.constructEvent(req2.rawBody, header2, previous, 300, undefined, later)).toThrow();
    expect((await api.request('GET', '/webhook', { key: p.apiKey })).body.rotation).toBeNull();
    await receiver.close();
  });

  it('takes overlap_minutes (1-10080), keeps only the secret that was current on a second rotation, and 404s GET without a webhook', async () => {
    const receiver = await startReceiver();
    const p = await stack.partnerWithWebhook(receiver.url);
    const r1 = await api.request('PUT', '/webhook', { key: p.apiKey, body: { url: receiver.url, rotate: true, overlap_minutes: 5 } });
    const r2 = await api.request('PUT', '/webhook', { key: p.apiKey, body: { url: receiver.url, rotate: true, overlap_minutes: 5 } });
    expect((await api.request('GET', '/webhook', { key: p.apiKey })).body.rotation).toEqual({
      previous_secret_expires_at: new Date(clock.now().getTime() + 5 * 60_000).toISOString(),
    });
    await stack.record(p.partner.id);
    const [req] = await receiver.waitFor(1);
    const at = clock.now().getTime();
    const header = req.headers['x-whiteboard-signature'] as string;
    expect(verifyWebhookSignature(req.rawBody, header, r2.body.secret, { now: at }).ok).toBe(true);
    expect(verifyWebhookSignature(req.rawBody, header, r1.body.secret, { now: at }).ok).toBe(true);
    expect(verifyWebhookSignature(req.rawBody, header, p.secret, { now: at }).ok).toBe(false);
    for (const overlap_minutes of [0, 10_081, 1.5]) {
      const bad = await api.request('PUT', '/webhook', { key: p.apiKey, body: { url: receiver.url, rotate: true, overlap_minutes } });
      expect(bad.status, String(overlap_minutes)).toBe(422);
    }
    // a secret sealed under a key no longer configured: GET still answers, with no rotation to show
    const foreign = new SecretBox([randomBytes(32).toString('base64')]).seal('whsec_x whsec_y 99999999999999', p.partner.id);
    await stack.sql`UPDATE webhooks SET secret = ${foreign} WHERE partner_id = ${p.partner.id}`;
    const unreadable = await api.request('GET', '/webhook', { key: p.apiKey });
    expect([unreadable.status, unreadable.body.rotation]).toEqual([200, null]);
    const none = await partnerFactory(stack.sql);
    const res = await api.request('GET', '/webhook', { key: none.apiKey });
    expect([res.status, res.body]).toEqual([404, apiError('not_found', 'Webhook not found')]);
    await receiver.close();
  });
});

describe('DELETE /webhook and POST /webhook/test', () => {
  it('answers 204, cancels pending deliveries for good, and is idempotent', async () => {
    const rx = await startReceiver({ behaviour: answer(503) });
    const p = await stack.partnerWithWebhook(rx.url);
    const ev = await stack.record(p.partner.id);
    await rx.waitFor(1);
    await eventually(async () => (await deliveryOf(stack.sql, ev.id)).claimed_by === null);
    const del = await api.request('DELETE', '/webhook', { key: p.apiKey });
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect((await deliveryOf(stack.sql, ev.id)).state).toBe('cancelled');
    expect((await api.request('DELETE', '/webhook', { key: p.apiKey })).status).toBe(204);
    rx.setBehaviour(answer(200));
    await api.request('PUT', '/webhook', { key: p.apiKey, body: { url: rx.url } });
    await advance(24 * 3600_000);
    expect(rx.requests).toHaveLength(1);
    const listed = await api.request('GET', `/events?after=${ev.id - 1}&limit=1`, { key: p.apiKey });
    expect(listed.body[0]).toMatchObject({ id: ev.id, delivery: { state: 'cancelled', attempts: 1 } });
    await rx.close();
  });

  it('answers 400 no_webhook to POST /webhook/test without a webhook, and records nothing', async () => {
    const p = await partnerFactory(stack.sql);
    const res = await api.request('POST', '/webhook/test', { key: p.apiKey });
    expect(res.status).toBe(400);
    expect(res.body).toEqual(apiError('no_webhook'));
    await api.request('PUT', '/webhook', { key: p.apiKey, body: { url: 'https://hook.test/' } });
    await api.request('DELETE', '/webhook', { key: p.apiKey });
    expect((await api.request('POST', '/webhook/test', { key: p.apiKey })).status).toBe(400);
    expect((await api.request('GET', '/events', { key: p.apiKey })).body).toEqual([]);
  });

  it('orders DELETE after an event transaction in flight: the delivery it scheduled is cancelled, never left pending', async () => {
    const p = await stack.partnerWithWebhook('https://hook.test:1/'); // nothing listens: attempts fail
    let eventId = 0;
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    const tx = stack.sql.begin(async (t) => {
      eventId = (await recordEvent(t, p.partner.id, 'balance.low', { balance_seconds: 10, balance_minutes: 0 }, clock.now())).id;
      await hold;
    });
    await eventually(async () => eventId > 0);
    let deleted = false;
    const del = api.request('DELETE', '/webhook', { key: p.apiKey }).then((r) => ((deleted = true), r));
    await sleep(200);
    expect(deleted).toBe(false); // waits for the event's transaction (FOR KEY SHARE on the webhook row)
    release();
    await tx;
    expect((await del).status).toBe(204);
    await eventually(async () => (await deliveryOf(stack.sql, eventId)).claimed_by === null);
    expect((await deliveryOf(stack.sql, eventId)).state).toBe('cancelled');
  });
});

describe('GET /events', () => {
  it("lists the partner's events in id order after the cursor, in pages linked by a Link header", async () => {
    const p = await partnerFactory(stack.sql);
    const other = await partnerFactory(stack.sql);
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await stack.record(p.partner.id, 'participant.joined', { lesson_id: 'l', external_id: null, role: 'student', name: `n${i}` })).id);
      await stack.record(other.partner.id);
    }
    const page1 = await api.request('GET', '/events?limit=2', { key: p.apiKey });
    expect(page1.status).toBe(200);
    expect(page1.body.map((e: { id: number }) => e.id)).toEqual(ids.slice(0, 2));
    expect(page1.body[0]).toEqual({
      id: ids[0],
      type: 'participant.joined',
      created_at: expect.any(String),
      data: { lesson_id: 'l', external_id: null, role: 'student', name: 'n0' },
      delivery: null,
    });
    const next = /<([^>]+)>; rel="next"/.exec(page1.headers.get('link') ?? '')![1];
    const page2 = await api.request('GET', next, { key: p.apiKey });
    expect(page2.body.map((e: { id: number }) => e.id)).toEqual(ids.slice(2, 4));
    const rest = await api.request('GET', `/events?after=${ids[3]}`, { key: p.apiKey });
    expect(rest.body.map((e: { id: number }) => e.id)).toEqual([ids[4]]);
    expect(rest.headers.get('link')).toBeNull();
    expect((await api.request('GET', `/events?after=${ids[4]}`, { key: p.apiKey })).body).toEqual([]);
    for (const q of ['limit=0', 'limit=1001', 'after=-1', 'after=x', 'after=', 'limit=1e2']) {
      expect((await api.request('GET', `/events?${q}`, { key: p.apiKey })).status, q).toBe(422);
    }
  });

  it('never delivers later an event recorded while no webhook was set; it stays readable, and redeliver sends it', async () => {
    const rx = await startReceiver();
    const p = await partnerFactory(stack.sql);
    const ev = await stack.record(p.partner.id, 'balance.exhausted', { balance_seconds: 0, balance_minutes: 0 });
    await api.request('PUT', '/webhook', { key: p.apiKey, body: { url: rx.url } });
    await advance(24 * 3600_000);
    expect(rx.requests).toHaveLength(0);
    const listed = await api.request('GET', '/events', { key: p.apiKey });
    expect(listed.body).toEqual([expect.objectContaining({ id: ev.id, type: 'balance.exhausted', delivery: null })]);
    const re = await api.request('POST', `/events/${ev.id}/redeliver`, { key: p.apiKey });
    expect(re.status).toBe(202);
    expect(re.body).toMatchObject({ id: ev.id, delivery: { state: 'pending', attempts: 0 } });
    const [req] = await rx.waitFor(1);
    expect(req.body).toMatchObject({ id: ev.id, type: 'balance.exhausted' });
    await rx.close();
  });
});

describe('POST /events/{id}/redeliver and GET /webhook/deliveries', () => {
  it('redelivers a delivered event with the same id and body in a new round, and logs every attempt', async () => {
    const rx = await startReceiver();
    const p = await stack.partnerWithWebhook(rx.url);
    const ev = await stack.record(p.partner.id);
    await rx.waitFor(1);
    await eventually(async () => (await deliveryOf(stack.sql, ev.id)).state === 'delivered');
    const re = await api.request('POST', `/events/${ev.id}/redeliver`, { key: p.apiKey });
    expect(re.status).toBe(202);
    const [first, second] = await rx.waitFor(2);
    expect(second.headers['x-whiteboard-delivery']).toBe(String(ev.id));
    expect(second.rawBody.equals(first.rawBody)).toBe(true);
    await eventually(async () => { const d = await deliveryOf(stack.sql, ev.id); return d.state === 'delivered' && d.round === 2; });
    const log = await api.request('GET', `/webhook/deliveries?event_id=${ev.id}`, { key: p.apiKey });
    expect(log.status).toBe(200);
    expect(log.body).toEqual([1, 2].map(() => ({
      id: expect.any(Number),
      event_id: ev.id,
      attempt: 1,
      url: rx.url,
      address: '127.0.0.1',
      attempted_at: expect.any(String),
      duration_ms: expect.any(Number),
      status_code: 200,
      error: null,
      delivered: true,
    })));
    await rx.close();
  });

  it('restarts the full set of attempts for an undelivered event', async () => {
    const rx = await startReceiver({ behaviour: answer(500) });
    const p = await stack.partnerWithWebhook(rx.url);
    const ev = await stack.record(p.partner.id);
    await eventually(async () => {
      clock.advance(13 * 3600_000); // past any retry delay of the schedule
      dispatcher.wake();
      return (await deliveryOf(stack.sql, ev.id)).state === 'undelivered';
    }, 'the delivery undelivered', 20_000, 100);
    expect(rx.requests).toHaveLength(9);
    const re = await api.request('POST', `/events/${ev.id}/redeliver`, { key: p.apiKey });
    expect(re.body.delivery).toMatchObject({ state: 'pending', attempts: 0 });
    await rx.waitFor(10);
    await eventually(async () => (await deliveryOf(stack.sql, ev.id)).attempts === 1);
    expect(await deliveryOf(stack.sql, ev.id)).toMatchObject({ state: 'pending', round: 2 });
    await rx.close();
  });

  it("answers 404 for an unknown or another partner's event or an id no event can have, 400 no_webhook without a webhook", async () => {
    const p = await stack.partnerWithWebhook('https://hook.test:1/');
    const other = await partnerFactory(stack.sql);
    const theirs = await stack.record(other.partner.id);
    for (const id of [theirs.id, 999_999_999]) {
      const res = await api.request('POST', `/events/${id}/redeliver`, { key: p.apiKey });
      expect(res.status).toBe(404);
      expect(res.body.detail.code).toBe('not_found');
    }
    expect((await api.request('POST', '/events/abc/redeliver', { key: p.apiKey })).body).toEqual(apiError('not_found', 'Event not found'));
    const own = await stack.record(other.partner.id);
    const res = await api.request('POST', `/events/${own.id}/redeliver`, { key: other.apiKey });
    expect(res.status).toBe(400);
    expect(res.body.detail.code).toBe('no_webhook');
  });

  it('pages the delivery log oldest first by attempt id and shows only the partner\'s own attempts', async () => {
    const rx = await startReceiver();
    const p = await stack.partnerWithWebhook(rx.url);
    for (let i = 0; i < 3; i++) await stack.record(p.partner.id);
    await rx.waitFor(3);
    await eventually(async () => (await api.request('GET', '/webhook/deliveries', { key: p.apiKey })).body.length === 3);
    const page1 = await api.request('GET', '/webhook/deliveries?limit=2', { key: p.apiKey });
    expect(page1.body).toHaveLength(2);
    expect(page1.body[0].id).toBeLessThan(page1.body[1].id);
    const next = /<([^>]+)>; rel="next"/.exec(page1.headers.get('link') ?? '')![1];
    const page2 = await api.request('GET', next, { key: p.apiKey });
    expect(page2.body).toHaveLength(1);
    const fresh = await partnerFactory(stack.sql);
    expect((await api.request('GET', '/webhook/deliveries', { key: fresh.apiKey })).body).toEqual([]);
    await rx.close();
  });
});

describe('OpenAPI and secrecy', () => {
  it('documents every webhook and events route in the OpenAPI document', async () => {
    const doc = (await api.request('GET', '/api/partner/v1/openapi.json')).body;
    expect(Object.keys(doc.paths['/webhook'])).toEqual(expect.arrayContaining(['put', 'delete']));
    expect(doc.paths['/webhook/test'].post.responses['202']).toBeDefined();
    expect(doc.paths['/webhook/test'].post.responses['400']).toBeDefined();
    expect(doc.paths['/webhook/deliveries'].get.parameters.map((x: { name: string }) => x.name).sort()).toEqual(['after', 'event_id', 'limit']);
    expect(doc.paths['/events'].get.parameters.map((x: { name: string }) => x.name).sort()).toEqual(['after', 'limit']);
    expect(doc.paths['/events/{id}/redeliver'].post.responses['202']).toBeDefined();
  });

  it('never writes a webhook secret to the logs, at any level, from the API or the dispatcher', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write(c, _e, cb) { lines.push(String(c)); cb(); } });
    const base = makeDeps({ env: { ...stack.env, LOG_LEVEL: 'trace' } });
    const deps = { ...base, log: pino({ level: 'trace' }, sink), webhookRuntime: buildWebhookRuntime(base.config, { resolve: loopbackResolver, ca: testCa() }) };
    const server = await startApi(deps, 0);
    const d = await startDispatcher(deps);
    const rx = await startReceiver({ behaviour: (_r, res, n) => res.writeHead(n === 0 ? 500 : 200).end() });
    const p = await partnerFactory(stack.sql);
    const res = await fetch(`http://127.0.0.1:${server.port}/api/partner/v1/webhook`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${p.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: rx.url }),
    });
    const { secret } = (await res.json()) as { secret: string };
    await fetch(`http://127.0.0.1:${server.port}/api/partner/v1/webhook/test`, { method: 'POST', headers: { authorization: `Bearer ${p.apiKey}` } });
    await rx.waitFor(1);
    await sleep(200);
    await d.close();
    await server.close();
    await base.close();
    await rx.close();
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).not.toContain(secret);
    expect(lines.join('\n')).not.toContain(secret.slice(6));
  });
});
