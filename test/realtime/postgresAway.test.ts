import postgres from 'postgres';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { AGAIN_MS } from '../../realtime/metering/JoinAnnouncer.js';
import { eventsOf } from '../helpers/lessons.js';
import { eventually } from '../helpers/wait.js';
import { join } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

/**
 * Postgres away from a gateway for longer than a participant.joined batch's
 * retries (6.2 s): the database refuses new connections (ALLOW_CONNECTIONS
 * false, which binds superusers too) and its backends are terminated, from a
 * connection to another database. People whose links the node already knows
 * still join (docs/metering.md, "Postgres unavailable").
 */
const gw = await startTestGateway();
const { sql } = gw.deps;
const database = new URL(gw.env.DATABASE_URL).pathname.slice(1);
const adminUrl = new URL(gw.env.DATABASE_URL);
adminUrl.pathname = '/postgres';
const admin = postgres(adminUrl.toString(), { max: 1, onnotice: () => undefined });
afterAll(() => admin.end());

async function postgresAway() {
  await admin.unsafe(`ALTER DATABASE "${database}" WITH ALLOW_CONNECTIONS false`);
  await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${database}`;
}
const postgresBack = () => admin.unsafe(`ALTER DATABASE "${database}" WITH ALLOW_CONNECTIONS true`);

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
      await new Promise((r) => setTimeout(r, 7500)); // past the batch's three retries (200 + 1000 + 5000 ms)
      await postgresBack();
      const [, joined] = await eventually(async () => {
        const events = await eventsOf(sql, f.partner.id, 'participant.joined').catch(() => []);
        return events.length > 1 && events;
      }, "Bob's participant.joined after Postgres came back", AGAIN_MS + 8000);
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
