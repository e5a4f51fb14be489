import { describe, expect, it, vi } from 'vitest';
import { eventsOf } from '../helpers/lessons.js';
import { postgresSwitch } from '../helpers/postgresAway.js';
import { eventually } from '../helpers/wait.js';
import { join } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

/**
 * Postgres away from a gateway for longer than a participant.joined batch's
 * retries: the database refuses new connections (ALLOW_CONNECTIONS false, which
 * binds superusers too) and its backends are terminated, from a connection to
 * another database. People whose links the node already knows still join
 * (docs/metering.md, "Postgres unavailable"). The retries (6.2 s in production,
 * as for the attendance marks, 7.6 s for the meter's writes) are shortened to
 * 70 ms here and the next try of a kept batch from 5 s to 200 ms: that changes
 * nothing but the waits.
 */
const options = {
  retries: { meter: [20, 50], joins: { waits: [20, 50], againMs: 200 }, presenceLog: { waits: [20, 50], againMs: 200 } },
};
const gw = await startTestGateway({ options });
const { sql } = gw.deps;
const { away: postgresAway, back: postgresBack } = postgresSwitch(gw.env.DATABASE_URL);

describe('Postgres away longer than the retries of a participant.joined batch', () => {
  it('records the arrival once Postgres is back, dated when the person joined, once', async () => {
    const f = await lessonWithLinks(sql);
    const bob = await f.link('bob', { name: 'Bob' });
    await vi.waitFor(() => expect(gw.gateway.admission.cached(bob)).toBe(true)); // the node knows the link
    // Ann is there first: the lesson's meter is in Redis, so an arrival needs no seed from Postgres
    const a = await join(gw.wsUrl(await f.link('ann', { name: 'Ann', role: 'teacher' })));
    await gw.settle();
    expect(await eventsOf(sql, f.partner.id, 'participant.joined')).toHaveLength(1);
    await postgresAway();
    try {
      const before = Date.now();
      const b = await join(gw.wsUrl(bob));
      expect(b.messages[0]).toMatchObject({ type: 'welcome', you: { name: 'Bob' } });
      const after = Date.now();
      await gw.settle(); // past the batch's retries: it is kept for a later try
      await postgresBack();
      const [, joined] = await eventually(async () => {
        const events = await eventsOf(sql, f.partner.id, 'participant.joined').catch(() => []);
        return events.length > 1 && events;
      }, "Bob's participant.joined after Postgres came back", options.retries.joins.againMs + 8000);
      expect(joined.data).toMatchObject({ lesson_id: f.lesson.id, name: 'Bob', role: 'student' });
      expect(joined.created_at.getTime()).toBeGreaterThanOrEqual(before);
      expect(joined.created_at.getTime()).toBeLessThanOrEqual(after);
      await Promise.all([a.close(), b.close()]);
      await gw.settle();
      expect(await eventsOf(sql, f.partner.id, 'participant.joined')).toHaveLength(2);
    } finally {
      await postgresBack();
    }
  }, 40_000);
});

describe('a gateway stopped while Postgres is away', () => {
  it("has Redis forget the arrivals it could not record, so a person moving to another node is announced there", async () => {
    const env = { ...gw.env, DRAIN_SECONDS: '1' };
    const [n1, n2] = [await startTestGateway({ env, options }), await startTestGateway({ env, options })];
    const f = await lessonWithLinks(sql);
    const bob = await f.link('bob', { name: 'Bob' });
    await vi.waitFor(() => expect(n1.gateway.admission.cached(bob) && n2.gateway.admission.cached(bob)).toBe(true));
    // the lesson is open on both nodes before the outage (a lesson new on a node reads its meter from Postgres)
    const a = await join(n1.wsUrl(await f.link('ann', { name: 'Ann', role: 'teacher' })));
    const c = await join(n2.wsUrl(await f.link('cid', { name: 'Cid' })));
    await Promise.all([n1.settle(), n2.settle()]);
    expect(await eventsOf(sql, f.partner.id, 'participant.joined')).toHaveLength(2);
    await postgresAway();
    try {
      const onN1 = await join(n1.wsUrl(bob));
      const stopped = n1.close(); // drains: Bob's page moves to the other node
      await onN1.closed;
      const onN2 = await join(n2.wsUrl(bob));
      expect(onN2.messages[0]).toMatchObject({ type: 'welcome', you: { name: 'Bob' } });
      await stopped; // n1 gave up on Bob's participant.joined (Postgres still away)
      await postgresBack();
      const events = await eventually(async () => {
        const e = await eventsOf(sql, f.partner.id, 'participant.joined').catch(() => []);
        return e.length > 2 && e;
      }, "Bob's participant.joined, recorded by the node he moved to", options.retries.joins.againMs + 8000);
      expect(events.map((e) => e.data.name).sort()).toEqual(['Ann', 'Bob', 'Cid']);
      await Promise.all([a.close(), c.close(), onN2.close()]);
      await n2.settle();
      expect(await eventsOf(sql, f.partner.id, 'participant.joined')).toHaveLength(3);
    } finally {
      await postgresBack();
    }
  }, 60_000);
});
