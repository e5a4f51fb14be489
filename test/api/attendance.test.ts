import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApi } from '../helpers/api.js';
import { join, type TestClient } from '../realtime/helpers/client.js';
import { lessonWithLinks } from '../realtime/helpers/fixtures.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';

/**
 * GET /lessons/{id}/attendance from real presence: two gateway nodes in this
 * process, one clock, people arriving and leaving through real sockets. The
 * figures must reconcile with the metering (GET /calls): a session's seconds
 * are the time two or more of its people's intervals overlap.
 */
const clock = new ManualClock(new Date('2026-04-06T10:00:00Z'));
const n1 = await startTestGateway({ clock });
const n2 = await startTestGateway({ clock, env: n1.env });
const api = await startTestApi({ env: n1.env, clock });
const { sql } = n1.deps;
const sec = (s: number) => s * 1000;
const settle = () => Promise.all([n1.settle(), n2.settle()]);

async function lesson() {
  const f = await lessonWithLinks(sql, { minutes: 600 });
  const link = async (id: string, role: 'teacher' | 'student' = 'student', name = id) => {
    const res = await api.request('POST', `/lessons/${f.lesson.id}/links`, { key: f.apiKey, body: { user: { id, name, role } } });
    expect(res.status).toBe(201);
    return res.body as { id: string; person: string; token: string };
  };
  const attendance = (q = '') => api.request('GET', `/lessons/${f.lesson.id}/attendance${q}`, { key: f.apiKey });
  return { ...f, link, attendance };
}

async function leave(...clients: TestClient[]) {
  for (const c of clients) await c.close();
  await settle();
}

/** Seconds during which two or more of the intervals overlap (what metering bills). */
function overlapTwo(people: { intervals: { joined_at: string; left_at: string | null }[] }[], now: Date): number {
  const edges: [number, number][] = [];
  for (const p of people) for (const i of p.intervals) edges.push([Date.parse(i.joined_at), 1], [i.left_at ? Date.parse(i.left_at) : now.getTime(), -1]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let n = 0;
  let since = 0;
  let ms = 0;
  for (const [t, d] of edges) {
    if (n >= 2) ms += t - since;
    n += d;
    since = t;
  }
  return ms / 1000;
}

describe('GET /lessons/{id}/attendance', () => {
  it('lists each person of each session with their links and intervals; several tabs on two nodes are one interval; the seconds reconcile with /calls', async () => {
    const f = await lesson();
    const t0 = clock.now();
    const tl = await f.link('teacher-1', 'teacher', 'Ann');
    const teacher = await join(n1.wsUrl(tl.token));
    await settle();
    clock.advance(sec(60)); // the teacher waits a minute alone: present, not metered
    const sl = await f.link('student-1', 'student', 'Bob');
    const tab1 = await join(n2.wsUrl(sl.token));
    await settle();
    clock.advance(sec(30));
    const tab2 = await join(n1.wsUrl(sl.token)); // a second tab, on the other node
    await settle();
    clock.advance(sec(10));
    await leave(tab1); // still present through tab2
    clock.advance(sec(20));
    await Promise.all([teacher.alive(), tab2.alive()]);
    await n1.maintain();

    // running: open intervals
    let res = await f.attendance();
    expect(res.status).toBe(200);
    expect(res.body.sessions).toHaveLength(1);
    const running = res.body.sessions[0];
    expect(running).toMatchObject({ going: true, ended_at: null, started_at: new Date(t0.getTime() + sec(60)).toISOString() });
    const byName = (s: any, name: string) => s.people.find((p: any) => p.name === name);
    expect(byName(running, 'Ann')).toEqual({
      person: tl.person,
      role: 'teacher',
      name: 'Ann',
      link_ids: [tl.id],
      intervals: [{ joined_at: t0.toISOString(), left_at: null }],
      present_seconds: 120,
    });
    expect(byName(running, 'Bob')).toMatchObject({ person: sl.person, link_ids: [sl.id], intervals: [{ joined_at: new Date(t0.getTime() + sec(60)).toISOString(), left_at: null }], present_seconds: 60 });

    clock.advance(sec(15));
    await leave(tab2); // the student's last connection: left at t0 + 135 s
    clock.advance(sec(5));
    await leave(teacher); // t0 + 140 s
    clock.advance(sec(400)); // past the idle end
    await n1.maintain();
    await n2.maintain();

    res = await f.attendance();
    const [ended] = res.body.sessions;
    expect(ended.going).toBe(false);
    expect(byName(ended, 'Bob').intervals).toEqual([{ joined_at: new Date(t0.getTime() + sec(60)).toISOString(), left_at: new Date(t0.getTime() + sec(135)).toISOString() }]);
    expect(byName(ended, 'Bob').present_seconds).toBe(75);
    expect(byName(ended, 'Ann').intervals).toEqual([{ joined_at: t0.toISOString(), left_at: new Date(t0.getTime() + sec(140)).toISOString() }]);
    expect(ended.seconds).toBe(75);
    expect(overlapTwo(ended.people, clock.now())).toBe(ended.seconds);
    const calls = await api.request('GET', '/calls', { key: f.apiKey });
    const call = calls.body.items.find((c: any) => c.id === ended.id);
    expect(call.seconds).toBe(ended.seconds);
    expect(res.body.outside_sessions).toEqual([]);

    // a link's use shows in the list; the token never does
    const links = await api.request('GET', `/lessons/${f.lesson.id}/links`, { key: f.apiKey });
    expect(links.body.map((l: any) => [l.id, l.person, l.last_used_at])).toEqual([
      [tl.id, tl.person, t0.toISOString()],
      [sl.id, sl.person, new Date(t0.getTime() + sec(90)).toISOString()],
    ]);
    expect(links.text).not.toContain(sl.token);
  });

  it('puts a second session apart, filters by session_id, and lists someone waiting alone after the last session outside every session', async () => {
    const f = await lesson();
    const a = await f.link('a');
    const b = await f.link('b');
    const firstSession = async () => {
      const ca = await join(n1.wsUrl(a.token));
      const cb = await join(n2.wsUrl(b.token));
      await settle();
      clock.advance(sec(30));
      await leave(ca, cb);
      clock.advance(sec(400));
      await n1.maintain();
    };
    await firstSession();
    await firstSession();
    const lonely = await join(n2.wsUrl(a.token));
    await settle();
    clock.advance(sec(7));

    const all = await f.attendance();
    expect(all.body.sessions.map((s: any) => [s.seconds, s.people.length])).toEqual([[30, 2], [30, 2]]);
    expect(all.body.outside_sessions).toEqual([expect.objectContaining({ person: a.person, present_seconds: 7, intervals: [expect.objectContaining({ left_at: null })] })]);
    // the same person reference in both sessions: one person across the partner's lessons
    expect(all.body.sessions[1].people.map((p: any) => p.person).sort()).toEqual([a.person, b.person].sort());

    const one = await f.attendance(`?session_id=${all.body.sessions[1].id}`);
    expect(one.status).toBe(200);
    expect(one.body.sessions).toEqual([all.body.sessions[1]]);
    expect(one.body.outside_sessions).toEqual([]);
    expect((await f.attendance('?session_id=999999999')).status).toBe(404);
    expect((await f.attendance('?session_id=abc')).status).toBe(422);
    await leave(lonely);
  });

  it("answers 404 for another partner's lesson and 410 for an archived one", async () => {
    const f = await lesson();
    const other = await lesson();
    expect((await api.request('GET', `/lessons/${f.lesson.id}/attendance`, { key: other.apiKey })).body.detail.code).toBe('not_found');
    expect((await api.request('DELETE', `/lessons/${f.lesson.id}`, { key: f.apiKey })).status).toBe(204);
    const gone = await f.attendance();
    expect(gone.status).toBe(410);
    expect(gone.body.detail.code).toBe('archived');
  });
});
