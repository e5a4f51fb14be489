import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { loadConfig } from '../../src/config.js';
import { verifyWebhookSignature } from '../../src/webhooks/verify.js';
import { answer, startReceiver } from './helpers/receiver.js';
import { eventually } from '../helpers/wait.js';
import { attemptsOf, deliveryOf, startWebhookStack } from './helpers/stack.js';

const clock = new ManualClock(Date.now());
const stack = await startWebhookStack({ clock });
const dispatcher = await stack.dispatcher();

const SPEC_SCHEDULE = [30, 120, 600, 1800, 3600, 10800, 21600, 43200];

describe('retry schedule', () => {
  it('defaults WEBHOOK_RETRY_SCHEDULE to the spec: 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h, 12 h', () => {
    expect(loadConfig({}).WEBHOOK_RETRY_SCHEDULE).toEqual(SPEC_SCHEDULE);
    expect(stack.api.deps.config.WEBHOOK_RETRY_SCHEDULE).toEqual(SPEC_SCHEDULE);
  });

  it('makes 9 attempts on the schedule under a moved clock, never early, then marks the event undelivered', async () => {
    const rx = await startReceiver({ behaviour: answer(500) });
    const p = await stack.partnerWithWebhook(rx.url);
    const ev = await stack.record(p.partner.id);
    const start = clock.now().getTime();
    await rx.waitFor(1);
    for (let i = 0; i < SPEC_SCHEDULE.length; i++) {
      // wait until the previous attempt is written, then stop 1 s short of the due time: nothing is sent
      await eventually(async () => { const d = await deliveryOf(stack.sql, ev.id); return d.attempts === i + 1 && d.claimed_by === null; });
      clock.advance(SPEC_SCHEDULE[i] * 1000 - 1000);
      dispatcher.wake();
      await new Promise((r) => setTimeout(r, 150));
      expect(rx.requests).toHaveLength(i + 1);
      clock.advance(1000);
      dispatcher.wake();
      await rx.waitFor(i + 2);
    }
    const d = await eventually(async () => { const x = await deliveryOf(stack.sql, ev.id); return x.state !== 'pending' && x; });
    expect(d).toMatchObject({ state: 'undelivered', attempts: 9, next_attempt_at: null });
    const log = await attemptsOf(stack.sql, ev.id);
    expect(log.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const offsets = log.map((a) => (a.attempted_at.getTime() - start) / 1000);
    let sum = 0;
    expect(offsets).toEqual([0, ...SPEC_SCHEDULE.map((s) => (sum += s))]);
    // every attempt: same id and body, signed with its own time
    const ts = rx.requests.map((r) => {
      expect(r.headers['x-whiteboard-delivery']).toBe(String(ev.id));
      expect(r.rawBody.equals(rx.requests[0].rawBody)).toBe(true);
      const header = String(r.headers['x-whiteboard-signature']);
      const t = Number(/t=(\d+)/.exec(header)![1]);
      expect(verifyWebhookSignature(r.rawBody, header, p.secret, { now: t * 1000 }).ok).toBe(true);
      return t - Math.floor(start / 1000);
    });
    expect(ts).toEqual(offsets);
    // nothing more, however far the clock moves
    clock.advance(7 * 24 * 3600 * 1000);
    dispatcher.wake();
    await new Promise((r) => setTimeout(r, 200));
    expect(rx.requests).toHaveLength(9);
    const listed = await stack.api.request('GET', `/events?after=${ev.id - 1}&limit=1`, { key: p.apiKey });
    expect(listed.body[0].delivery).toMatchObject({ state: 'undelivered', attempts: 9, next_attempt_at: null });
    await rx.close();
  });

  it('follows a shortened WEBHOOK_RETRY_SCHEDULE (tests) in real time', async () => {
    const fast = await stack.dispatcher({ env: { WEBHOOK_RETRY_SCHEDULE: '0,0' }, clock: { now: () => new Date() } });
    await dispatcher.close(); // leave the work to the fast one
    const rx = await startReceiver({ behaviour: answer(503) });
    const p = await stack.partnerWithWebhook(rx.url);
    const ev = await stack.record(p.partner.id, 'lesson.ended', { lesson_id: 'l' }, new Date());
    await rx.waitFor(3);
    const d = await eventually(async () => { const x = await deliveryOf(stack.sql, ev.id); return x.state !== 'pending' && x; });
    expect(d).toMatchObject({ state: 'undelivered', attempts: 3 });
    await new Promise((r) => setTimeout(r, 200));
    expect(rx.requests).toHaveLength(3);
    await fast.close();
    await rx.close();
  });
});
