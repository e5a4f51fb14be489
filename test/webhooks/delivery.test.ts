import { describe, expect, it } from 'vitest';
import { verifyWebhookSignature } from '../../src/webhooks/verify.js';
import { USER_AGENT } from '../../src/webhooks/signing.js';
import { answer, startReceiver } from './helpers/receiver.js';
import { eventually } from '../helpers/wait.js';
import { attemptsOf, deliveryOf, startWebhookStack } from './helpers/stack.js';

const stack = await startWebhookStack();
const dispatcher = await stack.dispatcher();

describe('delivery of recorded events', () => {
  it('POSTs exactly the spec request: headers, body {id,type,created_at,data}, and a signature that verifies over the raw body', async () => {
    const rx = await startReceiver();
    const p = await stack.partnerWithWebhook(`${rx.url}/hooks/in?src=wb`);
    const ev = await stack.record(p.partner.id, 'lesson.started', { lesson_id: 'lsn_1', external_id: null, started_at: '2026-01-01T00:00:00.000Z', ended_at: null, minutes: 0 });
    const [req] = await rx.waitFor(1);
    expect(req.method).toBe('POST');
    expect(req.path).toBe('/hooks/in?src=wb');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['user-agent']).toBe(USER_AGENT);
    expect(USER_AGENT).toMatch(/^[\w-]+\/\d+(\.\d+)*$/);
    expect(req.headers['x-whiteboard-event']).toBe('lesson.started');
    expect(req.headers['x-whiteboard-delivery']).toBe(String(ev.id));
    expect(req.headers['x-whiteboard-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(JSON.parse(req.rawBody.toString())).toEqual({
      id: ev.id,
      type: 'lesson.started',
      created_at: ev.created_at.toISOString(),
      data: { lesson_id: 'lsn_1', external_id: null, started_at: '2026-01-01T00:00:00.000Z', ended_at: null, minutes: 0 },
    });
    expect(Object.keys(req.body)).toEqual(['id', 'type', 'created_at', 'data']);
    expect(verifyWebhookSignature(req.rawBody, req.headers['x-whiteboard-signature'], p.secret)).toEqual({ ok: true, timestamp: expect.any(Number) });
    expect(verifyWebhookSignature(req.rawBody, req.headers['x-whiteboard-signature'], `${p.secret}x`).ok).toBe(false);
    const d = await eventually(async () => { const x = await deliveryOf(stack.sql, ev.id); return x.state === 'delivered' && x; });
    expect(d).toMatchObject({ state: 'delivered', attempts: 1, claimed_by: null });
    const log = await attemptsOf(stack.sql, ev.id);
    expect(log).toEqual([expect.objectContaining({ attempt: 1, status_code: 200, error: null, delivered: true, address: '127.0.0.1', dispatcher: dispatcher.id })]);
    await rx.close();
  });

  it('counts every 2xx as delivered', async () => {
    for (const status of [200, 201, 202, 204, 299]) {
      const rx = await startReceiver({ behaviour: answer(status) });
      const p = await stack.partnerWithWebhook(rx.url);
      const ev = await stack.record(p.partner.id);
      await eventually(async () => (await deliveryOf(stack.sql, ev.id)).state === 'delivered');
      await rx.close();
    }
  });

  it('delivers an event recorded through POST /webhook/test, and answers 202 with that event', async () => {
    const rx = await startReceiver();
    const p = await stack.partnerWithWebhook(rx.url);
    const res = await stack.api.request('POST', '/webhook/test', { key: p.apiKey });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      id: expect.any(Number),
      type: 'webhook.test',
      created_at: expect.any(String),
      data: { message: expect.any(String) },
      delivery: { state: 'pending', attempts: 0, next_attempt_at: expect.any(String), last_attempt_at: null, delivered_at: null },
    });
    const [req] = await rx.waitFor(1);
    expect(req.headers['x-whiteboard-event']).toBe('webhook.test');
    expect(req.body).toEqual({ id: res.body.id, type: 'webhook.test', created_at: res.body.created_at, data: res.body.data });
    expect(verifyWebhookSignature(req.rawBody, req.headers['x-whiteboard-signature'], p.secret).ok).toBe(true);
    await rx.close();
  });
});
