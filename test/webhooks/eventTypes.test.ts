import { describe, expect, it } from 'vitest';
import { SPEC_EVENT_TYPES } from '../../src/events/outbox.js';
import { join } from '../realtime/helpers/client.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { eventually } from '../helpers/wait.js';
import { startReceiver } from './helpers/receiver.js';
import { startWebhookStack } from './helpers/stack.js';

/**
 * participant.left and the webhook's enabled_events: a receiver written for the
 * specification never gets a type it does not know; one that asks for
 * participant.left gets each interval, as presence ended it on a real gateway.
 */
const stack = await startWebhookStack();
await stack.dispatcher();
const gw = await startTestGateway({ env: { ...stack.env, DATABASE_URL: stack.databaseUrl } });
const api = stack.api;

async function visit(key: string) {
  const lessonId = (await api.request('POST', '/lessons', { key, body: { title: 'Hooks' } })).body.id as string;
  const link = (await api.request('POST', `/lessons/${lessonId}/links`, { key, body: { user: { id: 'u-1', name: 'Ann', role: 'student' } } })).body;
  const c = await join(gw.wsUrl(link.token));
  await c.close();
  await gw.settle();
  return { lessonId, link };
}

describe('webhook event types', () => {
  it('sends the specification six by default: participant.joined (with person and link_id) arrives, participant.left is recorded but not sent', async () => {
    const rx = await startReceiver();
    const p = await stack.partnerWithWebhook(`${rx.url}/in`);
    const key = p.apiKey;
    expect((await api.request('GET', '/webhook', { key })).body.enabled_events).toEqual([...SPEC_EVENT_TYPES]);
    const { lessonId, link } = await visit(key);
    const [joined] = await rx.waitFor(1);
    expect(JSON.parse(joined.rawBody.toString())).toMatchObject({ type: 'participant.joined', data: { lesson_id: lessonId, person: link.person, link_id: link.id } });
    const left = await eventually(async () => (await api.request('GET', '/events', { key })).body.find((e: any) => e.type === 'participant.left'), 'participant.left recorded');
    expect(left.delivery).toBeNull();
    await api.request('POST', '/webhook/test', { key }); // webhook.test is always sent: a later delivery proves the left one was skipped, not late
    await eventually(async () => rx.requests.some((r) => r.headers['x-whiteboard-event'] === 'webhook.test'), 'webhook.test');
    expect(rx.requests.map((r) => r.headers['x-whiteboard-event'])).not.toContain('participant.left');
  });

  it('sends participant.left with the interval to a webhook that lists it; a later PUT without the list keeps it; an unknown type is 422', async () => {
    const rx = await startReceiver();
    const p = await stack.partnerWithWebhook(`${rx.url}/in`);
    const key = p.apiKey;
    const enabled = ['participant.joined', 'participant.left'];
    const put = await api.request('PUT', '/webhook', { key, body: { url: `${rx.url}/in`, enabled_events: enabled } });
    expect(put.status).toBe(200);
    expect(put.body.enabled_events).toEqual(enabled);
    const again = await api.request('PUT', '/webhook', { key, body: { url: `${rx.url}/in`, rotate: true } });
    expect(again.body.enabled_events).toEqual(enabled);
    const secret = again.body.secret;
    expect(secret).toMatch(/^whsec_/);
    expect((await api.request('PUT', '/webhook', { key, body: { url: `${rx.url}/in`, enabled_events: ['lesson.paused'] } })).status).toBe(422);
    expect((await api.request('PUT', '/webhook', { key, body: { url: `${rx.url}/in`, enabled_events: [] } })).status).toBe(422);

    const { lessonId, link } = await visit(key);
    await eventually(async () => rx.requests.some((r) => r.headers['x-whiteboard-event'] === 'participant.left'), 'participant.left delivered');
    const body = JSON.parse(rx.requests.find((r) => r.headers['x-whiteboard-event'] === 'participant.left')!.rawBody.toString());
    expect(body.data).toMatchObject({ lesson_id: lessonId, role: 'student', name: 'Ann', person: link.person, link_id: link.id });
    const ms = Date.parse(body.data.left_at) - Date.parse(body.data.joined_at);
    expect(ms).toBeGreaterThanOrEqual(0);
    expect(body.data.seconds).toBe(Math.floor(ms / 1000));
    // the same interval as attendance shows
    const att = (await api.request('GET', `/lessons/${lessonId}/attendance`, { key })).body;
    expect(att.outside_sessions[0].intervals).toEqual([{ joined_at: body.data.joined_at, left_at: body.data.left_at }]);
  });
});
