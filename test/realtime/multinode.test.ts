import { afterAll, describe, expect, it } from 'vitest';
import { balanceOf } from '../helpers/factories.js';
import { makeDeps } from '../helpers/deps.js';
import { eventsOf } from '../helpers/lessons.js';
import { join } from './helpers/client.js';
import { lessonRow, lessonWithLinks, sessionsOf } from './helpers/fixtures.js';
import { isolatedEnv } from '../helpers/isolation.js';
import { suiteOrFull } from '../helpers/length.js';
import { eventually } from '../helpers/wait.js';
import { spawnGateway } from './helpers/processes.js';

/**
 * Two real gateway processes (src/main.ts, ROLES=gateway) on one database and
 * one Redis: presence, the two-person rule, events and charging are decided
 * across them.
 */
const env = { ...(await isolatedEnv()), GATEWAY_LEASE_SECONDS: '6' };
const deps = makeDeps({ env });
const { sql } = deps;
afterAll(() => deps.close());
const [n1, n2] = await Promise.all([spawnGateway(env), spawnGateway(env)]);

/** Registers a test in the default project only: the redis-cluster project leaves it out (not skipped, so the suite's count stays plain). */
const inDefaultProject: typeof it = process.env.TEST_REDIS === 'cluster' ? ((() => undefined) as unknown as typeof it) : it;

describe('two gateway nodes', () => {
  it('share presence, relay cursors across nodes, start one session with one lesson.started, and charge live within 10 s', async () => {
    const f = await lessonWithLinks(sql);
    const a = await join(n1.wsUrl(await f.link('a', { name: 'Ann' })));
    const t0 = Date.now();
    const b = await join(n2.wsUrl(await f.link('b', { name: 'Bob' })));
    expect(b.of('welcome')[0].people.map((p: any) => p.name).sort()).toEqual(['Ann', 'Bob']);
    await a.waitFor((m) => m.type === 'presence' && m.event === 'joined' && m.person.name === 'Bob', 'Bob joined on the other node');
    b.send({ type: 'cursor', x: 1, y: 2 });
    await a.waitFor((m) => m.type === 'cursor' && m.from === b.of('welcome')[0].you.id, 'cursor from the other node');
    a.send({ type: 'cursor', x: 3, y: 4 });
    await b.waitFor((m) => m.type === 'cursor' && m.x === 3, 'cursor back');

    const before = await balanceOf(sql, f.partner.id);
    await eventually(async () => (await balanceOf(sql, f.partner.id)) < before, 'the balance to move', 10_000);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(1);
    expect(await sessionsOf(sql, f.lesson.id)).toHaveLength(1);
    await Promise.all([a.close(), b.close()]);
  }, 20_000);

  it('never starts two sessions when pairs of people arrive at the same moment on both nodes', async () => {
    const lessons = await Promise.all(Array.from({ length: 12 }, () => lessonWithLinks(sql)));
    const urls = await Promise.all(lessons.map(async (f) => [n1.wsUrl(await f.link('x')), n2.wsUrl(await f.link('y')), n1.wsUrl(await f.link('z'))]));
    const clients = await Promise.all(urls.flat().map((u) => join(u))).catch((err) => {
      console.log(n1.logs.filter((l) => !l.includes('"level":30')).join('\n'), n2.logs.filter((l) => !l.includes('"level":30')).join('\n'));
      throw err;
    });
    for (const f of lessons) {
      await eventually(async () => (await sessionsOf(sql, f.lesson.id)).length > 0, 'a session');
    }
    await new Promise((r) => setTimeout(r, 500));
    for (const f of lessons) {
      expect(await sessionsOf(sql, f.lesson.id)).toHaveLength(1);
      expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(1);
    }
    await Promise.all(clients.map((c) => c.close()));
  }, 20_000);

  it('records participant.joined once for a person connected to both nodes at once', async () => {
    const f = await lessonWithLinks(sql);
    const token = await f.link('both', { name: 'Both' });
    const [c1, c2] = await Promise.all([join(n1.wsUrl(token)), join(n2.wsUrl(token))]);
    const c3 = await join(n2.wsUrl(token));
    // later arrivals on each node: once theirs are recorded, a second one for Both would be too
    const later = await Promise.all([join(n1.wsUrl(await f.link('p1', { name: 'P1' }))), join(n2.wsUrl(await f.link('p2', { name: 'P2' })))]);
    const joined = await eventually(async () => {
      const e = await eventsOf(sql, f.partner.id, 'participant.joined');
      return e.some((x) => x.data.name === 'P1') && e.some((x) => x.data.name === 'P2') && e;
    }, 'the later arrivals recorded');
    expect(joined.filter((e) => e.data.name === 'Both')).toHaveLength(1);
    await Promise.all([c1.close(), c2.close(), c3.close(), ...later.map((c) => c.close())]);
  });

  // Once, in the default project: the reap of a dead node on a cluster (in every slot it had people in,
  // dated when its renewal was due) is tested in test/realtime/redisCluster.cluster.test.ts, and by the
  // presence and dead-node suites, which the redis-cluster project runs too.
  inDefaultProject('stops counting the people of a SIGKILLed node within 20 s, and bills no more than the lease after its death', async () => {
    // the suite: the lease of the other nodes here (6 s); the full length: the default lease (10 s)
    const leaseS = suiteOrFull(6, 10);
    const n3 = await spawnGateway({ ...env, GATEWAY_LEASE_SECONDS: String(leaseS) });
    const f = await lessonWithLinks(sql);
    const a = await join(n1.wsUrl(await f.link('a', { name: 'Ann' })));
    const b = await join(n3.wsUrl(await f.link('b', { name: 'Bob' })));
    await eventually(async () => (await sessionsOf(sql, f.lesson.id))[0], 'the session');
    const startedAt = (await sessionsOf(sql, f.lesson.id))[0].started_at.getTime();
    await new Promise((r) => setTimeout(r, 1500));
    const killedAt = Date.now();
    await n3.kill();
    void b;
    await a.waitFor((m) => m.type === 'presence' && m.event === 'left' && m.person.name === 'Bob', 'Bob reaped', 20_000);
    const noticed = Date.now() - killedAt;
    expect(noticed).toBeLessThan(20_000);
    // the reap's pause is charged before the meter's paused state is written (realtime/metering/Meter.ts)
    await eventually(async () => {
      const [m] = await sql<{ running_since: Date | null }[]>`SELECT running_since FROM lesson_meters WHERE lesson_id = ${f.lesson.id}`;
      return m && m.running_since === null;
    }, 'the session paused at the reap');
    const billed = (await lessonRow(sql, f.lesson.id)).billed_seconds;
    const [s] = await sessionsOf(sql, f.lesson.id);
    expect(s.ended_at).toBeNull(); // Ann is still there; the session is paused, not over
    // metered at least until the kill, at most until the lease ran out plus one heartbeat of the reaper (2 s)
    expect(billed).toBeGreaterThanOrEqual(Math.floor((killedAt - startedAt) / 1000) - 1);
    expect(billed).toBeLessThanOrEqual(Math.ceil((killedAt - startedAt) / 1000) + leaseS + 2);
    await new Promise((r) => setTimeout(r, 2500));
    expect((await lessonRow(sql, f.lesson.id)).billed_seconds).toBe(billed);
    await a.close();
  }, 90_000); // a gateway started here (20 s and more at load average 40) and up to 20 s of reaping
});
