import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApi } from '../helpers/api.js';
import { join, TestClient } from '../realtime/helpers/client.js';
import { lessonRow, lessonWithLinks, sessionsOf } from '../realtime/helpers/fixtures.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { rect } from '../board/factories.js';

/**
 * The board's history through the partner API (GET /lessons/{id}/history) and replay links
 * (POST /lessons/{id}/replay-links, the gateway's /replay/<token> routes): real gateway, sockets,
 * API, Postgres. A replay link is read-only and nobody: the gateway refuses its socket (so any
 * board operation), and it leaves the meter and attendance as they were.
 */
const clock = new ManualClock(new Date('2026-05-04T09:00:00Z'));
const gw = await startTestGateway({ clock });
const api = await startTestApi({ env: gw.env, clock });
const { sql } = gw.deps;

async function drawnLesson() {
  const f = await lessonWithLinks(sql);
  const link = async (id: string, role: 'teacher' | 'student') => {
    const res = await api.request('POST', `/lessons/${f.lesson.id}/links`, { key: f.apiKey, body: { user: { id, name: id, role } } });
    return res.body as { person: string; token: string };
  };
  const tl = await link('t1', 'teacher');
  const sl = await link('s1', 'student');
  const teacher = await join(gw.wsUrl(tl.token));
  const student = await join(gw.wsUrl(sl.token));
  const send = async (c: TestClient, ref: string, op: unknown) => {
    c.send({ type: 'board.op', ref, op });
    const m = await c.waitFor((x) => (x.type === 'board.ack' || x.type === 'board.reject') && x.ref === ref, ref, 15_000);
    expect(m.type).toBe('board.ack');
  };
  await send(teacher, 'a', { type: 'element.add', elements: [rect('r1')] });
  clock.advance(1000);
  await send(student, 'b', { type: 'element.add', elements: [rect('r2', { x: 300 })] });
  await send(teacher, 'c', { type: 'page.add', page: { id: 'p2', name: 'Page 2' }, after_page_id: null });
  await send(student, 'd', { type: 'element.delete', elements: [{ id: 'r2', version: 2, version_nonce: 0 }] });
  await send(teacher, 'e', { type: 'element.update', elements: [rect('r2', { x: 300, version: 3 })] });
  // an author's reference comes from their arrival's presence mark, which the gateway writes in a batch
  await gw.settle();
  await gw.gateway.presenceLog.idle();
  return { ...f, tl, sl, teacher, student };
}

describe('GET /lessons/{id}/history', () => {
  it('returns the committed operations oldest first with their author, paginated by after_seq with a Link to the next page', async () => {
    const f = await drawnLesson();
    const all = await api.request('GET', `/lessons/${f.lesson.id}/history`, { key: f.apiKey });
    expect(all.status).toBe(200);
    expect(all.body.map((e: { seq: number; role: string; person: string; op: { type: string } }) => [e.seq, e.role, e.person, e.op.type])).toEqual([
      [1, 'teacher', f.tl.person, 'element.add'],
      [2, 'student', f.sl.person, 'element.add'],
      [3, 'teacher', f.tl.person, 'page.add'],
      [4, 'student', f.sl.person, 'element.delete'],
      [5, 'teacher', f.tl.person, 'element.update'],
    ]);
    expect(all.body[0].at).toBe('2026-05-04T09:00:00.000Z');
    expect(all.body[1].at).toBe('2026-05-04T09:00:01.000Z');
    expect(all.headers.get('link')).toBeNull();
    const first = await api.request('GET', `/lessons/${f.lesson.id}/history?limit=2`, { key: f.apiKey });
    expect(first.body.map((e: { seq: number }) => e.seq)).toEqual([1, 2]);
    const next = /<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')![1];
    expect(next).toBe(`/api/partner/v1/lessons/${f.lesson.id}/history?after_seq=2&limit=2`);
    expect((await api.request('GET', next, { key: f.apiKey })).body.map((e: { seq: number }) => e.seq)).toEqual([3, 4]);
    expect((await api.request('GET', `/lessons/${f.lesson.id}/history?after_seq=5`, { key: f.apiKey })).body).toEqual([]);
    expect((await api.request('GET', `/lessons/${f.lesson.id}/history?limit=0`, { key: f.apiKey })).status).toBe(422);
    expect((await api.request('GET', `/lessons/${f.lesson.id}/history?after_seq=-1`, { key: f.apiKey })).status).toBe(422);
    // another partner's lesson is not found; an archived one is gone
    const other = await lessonWithLinks(sql);
    expect((await api.request('GET', `/lessons/${f.lesson.id}/history`, { key: other.apiKey })).status).toBe(404);
    await f.teacher.close();
    await f.student.close();
    expect((await api.request('DELETE', `/lessons/${f.lesson.id}`, { key: f.apiKey })).status).toBe(204);
    const gone = await api.request('GET', `/lessons/${f.lesson.id}/history`, { key: f.apiKey });
    expect([gone.status, gone.body.detail.code]).toEqual([410, 'archived']);
  });
});

describe('POST /lessons/{id}/replay-links', () => {
  it('issues an expiring read-only link (idempotent); the gateway serves the history and attendance to it, refuses its socket, and it is never present', async () => {
    const f = await drawnLesson();
    clock.advance(60_000);
    await f.teacher.close();
    await f.student.close();
    await gw.settle();
    await gw.maintain();
    const state = async () => ({ row: await lessonRow(sql, f.lesson.id), sessions: await sessionsOf(sql, f.lesson.id), attendance: (await api.request('GET', `/lessons/${f.lesson.id}/attendance`, { key: f.apiKey })).body });
    const before = await state();
    expect(before.sessions).toHaveLength(1);
    const headers = { 'idempotency-key': `replay-${f.lesson.id}` };
    const res = await api.request('POST', `/lessons/${f.lesson.id}/replay-links`, { key: f.apiKey, body: { ttl_minutes: 30 }, headers });
    expect(res.status).toBe(201);
    expect(res.body.url).toMatch(/\/replay\/[A-Za-z0-9_-]{43}$/);
    expect(res.body.expires_at).toBe(new Date(clock.now().getTime() + 30 * 60_000).toISOString());
    const again = await api.request('POST', `/lessons/${f.lesson.id}/replay-links`, { key: f.apiKey, body: { ttl_minutes: 30 }, headers });
    expect([again.status, again.body.token, again.headers.get('idempotent-replayed')]).toEqual([201, res.body.token, 'true']);
    expect((await api.request('POST', `/lessons/${f.lesson.id}/replay-links`, { key: (await lessonWithLinks(sql)).apiKey, body: {} })).status).toBe(404);
    expect((await api.request('POST', `/lessons/${f.lesson.id}/replay-links`, { key: f.apiKey, body: { ttl_minutes: 5 } })).status).toBe(422);

    const token = res.body.token as string;
    const lesson = await (await fetch(gw.httpUrl(`/replay/${token}/lesson`))).json();
    expect(lesson.seq).toBe(5);
    expect(lesson.attendance.sessions[0].people.map((p: { person: string }) => p.person).sort()).toEqual([f.tl.person, f.sl.person].sort());
    const history = await (await fetch(gw.httpUrl(`/replay/${token}/history?after_seq=3`))).json();
    expect([history.entries.map((e: { seq: number }) => e.seq), history.more]).toEqual([[4, 5], false]);

    // read-only: the replay token opens no socket, so no board operation gets through; a POST is not a route
    const ws = new TestClient(gw.wsUrl(token));
    await expect(ws.opened).rejects.toThrow(/401/);
    expect((await fetch(gw.httpUrl(`/replay/${token}/history`), { method: 'POST', body: '{}' })).status).toBe(405);
    const h = await api.request('GET', `/lessons/${f.lesson.id}/history`, { key: f.apiKey });
    expect(h.body.length).toBe(5);
    // and nobody: with the replay page open a while, the meter, the sessions and attendance are as they were
    await fetch(gw.httpUrl(`/replay/${token}`));
    clock.advance(60_000);
    await gw.settle();
    await gw.maintain();
    expect(await state()).toEqual(before);
    expect(await sql`SELECT 1 FROM presence_marks m JOIN replay_links r ON r.id = m.link_id`).toHaveLength(0);

    // expiring like entry links; gone with the lesson
    clock.advance(30 * 60_000);
    expect((await fetch(gw.httpUrl(`/replay/${token}/history`))).status).toBe(401);
    expect((await fetch(gw.httpUrl(`/replay/${token}`))).status).toBe(401);
    const fresh = await api.request('POST', `/lessons/${f.lesson.id}/replay-links`, { key: f.apiKey, body: {} });
    expect((await api.request('DELETE', `/lessons/${f.lesson.id}`, { key: f.apiKey })).status).toBe(204);
    expect((await fetch(gw.httpUrl(`/replay/${fresh.body.token}/lesson`))).status).toBe(410);
    expect((await api.request('POST', `/lessons/${f.lesson.id}/replay-links`, { key: f.apiKey, body: {} })).status).toBe(410);
  });
});
