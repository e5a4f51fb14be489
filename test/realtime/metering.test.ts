import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApi } from '../helpers/api.js';
import { balanceOf } from '../helpers/factories.js';
import { eventsOf } from '../helpers/lessons.js';
import { join } from './helpers/client.js';
import { lessonRow, lessonWithLinks, sessionsOf } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

const clock = new ManualClock(new Date('2026-02-02T10:00:00Z'));
const gw = await startTestGateway({ clock });
const { sql } = gw.deps;
const api = await startTestApi({ env: gw.env, clock });
const sec = (s: number) => s * 1000;

/** A lesson whose links are issued on the test clock. */
async function lesson(opts: Parameters<typeof lessonWithLinks>[1] = {}) {
  const f = await lessonWithLinks(sql, opts);
  return { ...f, url: async (user: string, role: 'teacher' | 'student' = 'student') => gw.wsUrl(await f.link(user, { role, at: clock.now() })) };
}

async function leave(...clients: { close(): Promise<number> }[]) {
  for (const c of clients) await c.close();
  await gw.settle();
}

describe('sessions', () => {
  it('meters nothing for a teacher alone, and starts a session the moment a second person is present', async () => {
    const f = await lesson();
    const teacher = await join(await f.url('t', 'teacher'));
    clock.advance(sec(600));
    await gw.maintain();
    expect(await sessionsOf(sql, f.lesson.id)).toEqual([]);
    expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toEqual([]);
    const startAt = clock.now();
    const student = await join(await f.url('s'));
    await gw.settle();
    const [session] = await sessionsOf(sql, f.lesson.id);
    expect(session.started_at).toEqual(startAt);
    const started = await eventsOf(sql, f.partner.id, 'lesson.started');
    expect(started.map((e) => e.data)).toEqual([
      { lesson_id: f.lesson.id, external_id: f.lesson.external_id, started_at: startAt.toISOString(), ended_at: null, minutes: 0 },
    ]);
    expect(await lessonRow(sql, f.lesson.id)).toMatchObject({ started_at: startAt, ended_at: null, billed_seconds: 0 });
    await leave(teacher, student);
  });

  it('meters while two are present, pauses below two, resumes when two are back: billed_seconds to the second', async () => {
    const f = await lesson({ minutes: 100 });
    const a = await join(await f.url('a'));
    let b = await join(await f.url('b'));
    clock.advance(sec(100));
    // both answered the gateway's keepalive meanwhile: presence is certain up to now
    await Promise.all([a.alive(), b.alive()]);
    await gw.maintain();
    expect((await lessonRow(sql, f.lesson.id)).billed_seconds).toBe(100);
    expect(await balanceOf(sql, f.partner.id)).toBe(6000 - 100);

    clock.advance(20_500);
    await leave(b); // paused at 120.5 s
    clock.advance(sec(50));
    await gw.maintain();
    expect((await lessonRow(sql, f.lesson.id)).billed_seconds).toBe(120);
    b = await join(await f.url('b')); // resumed
    clock.advance(29_600);
    await leave(b); // 120.5 + 29.6 = 150.1 s
    await gw.maintain();
    const row = await lessonRow(sql, f.lesson.id);
    expect(row.billed_seconds).toBe(150);
    expect(await balanceOf(sql, f.partner.id)).toBe(6000 - 150);
    const sessions = await sessionsOf(sql, f.lesson.id);
    expect(sessions).toHaveLength(1);
    expect(sessions[0]).toMatchObject({ seconds: 150, people_max: 2, ended_at: null });
    await leave(a);
  });

  it('a class leaving at once: lessons paused in the same moment (one pause batch) are each billed their own seconds, to their own partner', async () => {
    const lessons = [];
    for (let k = 0; k < 5; k++) {
      const f = await lesson();
      lessons.push({ f, a: await join(await f.url('a')), b: await join(await f.url('b')) });
      await gw.settle();
      clock.advance(10_300);
    }
    // every second person leaves in the same moment: 51.5, 41.2, 30.9, 20.6 and 10.3 s together
    await leave(...lessons.map((l) => l.b));
    for (const [k, { f }] of lessons.entries()) {
      const seconds = [51, 41, 30, 20, 10][k];
      expect((await lessonRow(sql, f.lesson.id)).billed_seconds).toBe(seconds);
      expect(await balanceOf(sql, f.partner.id)).toBe(600 * 60 - seconds);
      expect(await sessionsOf(sql, f.lesson.id)).toMatchObject([{ seconds, people_max: 2, ended_at: null }]);
    }
    await leave(...lessons.map((l) => l.a));
  });

  it('ends the session after SESSION_IDLE_SECONDS with nobody present: ended_at is when it became empty, minutes truncated', async () => {
    const f = await lesson({ mode: 'board_only' });
    const a = await join(await f.url('a'));
    const b = await join(await f.url('b'));
    const startedAt = clock.now();
    clock.advance(sec(179));
    await leave(a);
    clock.advance(sec(10));
    const emptyAt = clock.now();
    await leave(b);
    clock.advance(sec(299));
    await gw.maintain();
    expect((await sessionsOf(sql, f.lesson.id))[0].ended_at).toBeNull();
    expect(await eventsOf(sql, f.partner.id, 'lesson.ended')).toEqual([]);
    clock.advance(sec(1));
    await gw.maintain();
    await gw.maintain();
    const ended = await eventsOf(sql, f.partner.id, 'lesson.ended');
    expect(ended.map((e) => e.data)).toEqual([
      { lesson_id: f.lesson.id, external_id: f.lesson.external_id, started_at: startedAt.toISOString(), ended_at: emptyAt.toISOString(), minutes: 2, mode: 'board_only' },
    ]);
    expect(ended[0].created_at).toEqual(clock.now());
    expect(await lessonRow(sql, f.lesson.id)).toMatchObject({ ended_at: emptyAt, billed_seconds: 179 });
  });

  it('continues the same session when people return within the wait, and starts a new one with a new lesson.started after it ended', async () => {
    const f = await lesson();
    let a = await join(await f.url('a'));
    let b = await join(await f.url('b'));
    clock.advance(sec(60));
    await leave(a, b);
    clock.advance(sec(200));
    await gw.maintain();
    a = await join(await f.url('a'));
    b = await join(await f.url('b'));
    clock.advance(sec(30));
    await leave(a, b);
    await gw.maintain();
    let sessions = await sessionsOf(sql, f.lesson.id);
    expect(sessions).toHaveLength(1);
    expect(sessions[0].seconds).toBe(90);
    expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(1);

    clock.advance(sec(300));
    await gw.maintain();
    expect((await eventsOf(sql, f.partner.id, 'lesson.ended')).map((e) => e.data.minutes)).toEqual([1]);
    const restartAt = clock.now();
    a = await join(await f.url('a'));
    b = await join(await f.url('b'));
    await gw.settle();
    sessions = await sessionsOf(sql, f.lesson.id);
    expect(sessions).toHaveLength(2);
    expect(sessions[1]).toMatchObject({ started_at: restartAt, ended_at: null });
    const started = await eventsOf(sql, f.partner.id, 'lesson.started');
    expect(started.map((e) => e.data.started_at)).toEqual([sessions[0].started_at.toISOString(), restartAt.toISOString()]);
    expect(await lessonRow(sql, f.lesson.id)).toMatchObject({ started_at: restartAt, ended_at: null, billed_seconds: 90 });
    await leave(a, b);
  });

  it('an arrival in a lesson Redis lost, new on the node, continues the running session from Postgres (seed read with the bus subscription)', async () => {
    const f = await lesson();
    let a = await join(await f.url('a'));
    let b = await join(await f.url('b'));
    clock.advance(sec(40));
    await leave(a, b);
    // Redis loses the lesson while its session runs (empty, within the wait); the node has no room for it any more
    expect(gw.gateway.lesson(f.lesson.id)).toBeUndefined();
    expect(await gw.deps.redis.del(...['c', 'p', 'i', 'm', 'j'].map((k) => `gw:l:{${f.lesson.id}}:${k}`))).toBeGreaterThan(0);
    clock.advance(sec(10));
    a = await join(await f.url('a'));
    b = await join(await f.url('b'));
    clock.advance(sec(20));
    await leave(a, b);
    await gw.maintain();
    const sessions = await sessionsOf(sql, f.lesson.id);
    expect(sessions).toHaveLength(1);
    expect(sessions[0]).toMatchObject({ seconds: 60, ended_at: null });
    expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(1);
    expect(await lessonRow(sql, f.lesson.id)).toMatchObject({ billed_seconds: 60 });
  });

  it('ends an idle session at the exact rule even when no sweep ran before people came back', async () => {
    const f = await lesson();
    let a = await join(await f.url('a'));
    let b = await join(await f.url('b'));
    clock.advance(sec(42));
    const emptyAt = clock.now();
    await leave(a, b);
    clock.advance(sec(301));
    a = await join(await f.url('a'));
    b = await join(await f.url('b'));
    await gw.settle();
    const sessions = await sessionsOf(sql, f.lesson.id);
    expect(sessions).toHaveLength(2);
    expect(sessions[0]).toMatchObject({ ended_at: emptyAt, seconds: 42 });
    expect(sessions[1].ended_at).toBeNull();
    expect(await eventsOf(sql, f.partner.id, 'lesson.ended')).toHaveLength(1);
    expect(await eventsOf(sql, f.partner.id, 'lesson.started')).toHaveLength(2);
    await leave(a, b);
  });
});

describe('participant.joined', () => {
  it('is recorded once per 6 hours per person and lesson across reconnects and tabs, with role and name only', async () => {
    const f = await lesson();
    const token = await f.link('user-42', { role: 'teacher', name: 'Olga', at: clock.now(), ttl: 720 });
    const t1 = await join(gw.wsUrl(token));
    const t2 = await join(gw.wsUrl(token));
    await leave(t1, t2);
    clock.advance(sec(3600));
    await leave(await join(gw.wsUrl(token)));
    let events = await eventsOf(sql, f.partner.id, 'participant.joined');
    expect(events.map((e) => e.data)).toEqual([{ lesson_id: f.lesson.id, external_id: f.lesson.external_id, role: 'teacher', name: 'Olga', person: expect.stringMatching(/^psn_/), link_id: expect.stringMatching(/^lnk_/) }]);
    clock.advance(sec(5 * 3600));
    await leave(await join(gw.wsUrl(token)));
    events = await eventsOf(sql, f.partner.id, 'participant.joined');
    expect(events).toHaveLength(2);
    expect(JSON.stringify(events)).not.toContain('user-42');
  });
});

describe('charging', () => {
  it('charges a board-only lesson at board_rate_percent with the fraction exact across the session', async () => {
    const f = await lesson({ mode: 'board_only', boardRatePercent: 30 });
    const a = await join(await f.url('a'));
    const b = await join(await f.url('b'));
    // 7 flushes of 1 s each would charge 0 with per-tick rounding; the exact charge of 7 s at 30% is 2 s
    for (let i = 0; i < 7; i++) {
      clock.advance(sec(1));
      await gw.maintain();
    }
    await leave(a, b);
    const [s] = await sessionsOf(sql, f.lesson.id);
    expect(s).toMatchObject({ seconds: 7, charged_seconds: 2 });
    expect(await balanceOf(sql, f.partner.id)).toBe(36000 - 2);
  });

  it('shows a running lesson in GET /balance after one flush, lets it go negative, and records balance.exhausted once', async () => {
    const f = await lesson({ minutes: 1 });
    const a = await join(await f.url('a'));
    const b = await join(await f.url('b'));
    clock.advance(sec(5));
    await gw.maintain();
    let res = await api.request('GET', '/balance', { key: f.apiKey });
    expect(res.body.balance_seconds).toBe(55);
    clock.advance(sec(95));
    // both answered the gateway's keepalive meanwhile: presence is certain up to now
    await Promise.all([a.alive(), b.alive()]);
    await gw.maintain();
    res = await api.request('GET', '/balance', { key: f.apiKey });
    expect(res.body).toMatchObject({ balance_seconds: -40, balance_minutes: 0 });
    await leave(a, b);
    expect((await eventsOf(sql, f.partner.id, 'balance.exhausted')).map((e) => e.data)).toEqual([{ balance_seconds: -40, balance_minutes: 0 }]);
    expect(await eventsOf(sql, f.partner.id, 'balance.low')).toHaveLength(1);
  });
});
