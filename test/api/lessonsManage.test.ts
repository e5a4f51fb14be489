import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApi } from '../helpers/api.js';
import { partnerFactory } from '../helpers/factories.js';
import { join } from '../realtime/helpers/client.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';

/** PATCH /lessons/{id} (seen at once by the people in the lesson) and GET /lessons without external_id. */
const clock = new ManualClock(new Date('2026-06-01T09:00:00Z'));
const gw = await startTestGateway({ clock });
const api = await startTestApi({ env: gw.env, clock });
const sql = gw.deps.sql;

async function partner(plan?: 'full' | 'board_only') {
  const p = await partnerFactory(sql, { plan });
  const create = async (body: object = {}) => (await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'L', ...body } })).body;
  const link = async (lessonId: string, id: string) =>
    (await api.request('POST', `/lessons/${lessonId}/links`, { key: p.apiKey, body: { user: { id, name: id, role: 'student' } } })).body.token as string;
  return { key: p.apiKey, create, link };
}

describe('PATCH /lessons/{id}', () => {
  it('changes title and subject_mode; people in the lesson are told at once, and later arrivals get the new values', async () => {
    const p = await partner();
    const l = await p.create({ title: 'Algebar' });
    const c = await join(gw.wsUrl(await p.link(l.id, 'a')));
    const res = await api.request('PATCH', `/lessons/${l.id}`, { key: p.key, body: { title: 'Algebra', subject_mode: 'math' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: l.id, title: 'Algebra', subject_mode: 'math', mode: 'full' });
    const told = await c.waitType('lesson.updated');
    expect(told.lesson).toEqual({ id: l.id, title: 'Algebra', mode: 'full', subject_mode: 'math' });
    expect(c.closeCode).toBeUndefined();
    const later = await join(gw.wsUrl(await p.link(l.id, 'b')));
    expect(later.of('welcome')[0].lesson).toMatchObject({ title: 'Algebra', subject_mode: 'math' });
    expect((await api.request('GET', `/lessons/${l.id}`, { key: p.key })).body.title).toBe('Algebra');
    await Promise.all([c.close(), later.close()]);
    await gw.settle();
  });

  it('changes mode only while no session runs (409 session_running) and under the plan (403); bad input is 422 and changes nothing', async () => {
    const p = await partner();
    const l = await p.create();
    const a = await join(gw.wsUrl(await p.link(l.id, 'a')));
    const b = await join(gw.wsUrl(await p.link(l.id, 'b')));
    await gw.settle();
    const busy = await api.request('PATCH', `/lessons/${l.id}`, { key: p.key, body: { mode: 'board_only' } });
    expect(busy.status).toBe(409);
    expect(busy.body.detail.code).toBe('session_running');
    // the same mode is no change, and the title may change during a session
    expect((await api.request('PATCH', `/lessons/${l.id}`, { key: p.key, body: { mode: 'full', title: 'T2' } })).status).toBe(200);
    await Promise.all([a.close(), b.close()]);
    await gw.settle();
    clock.advance(400_000);
    await gw.maintain(); // the session ends 5 minutes after the lesson emptied
    const ok = await api.request('PATCH', `/lessons/${l.id}`, { key: p.key, body: { mode: 'board_only' } });
    expect(ok.status).toBe(200);
    expect(ok.body.mode).toBe('board_only');

    const boardOnly = await partner('board_only');
    const bl = await boardOnly.create();
    expect((await api.request('PATCH', `/lessons/${bl.id}`, { key: boardOnly.key, body: { mode: 'full' } })).body.detail.code).toBe('plan_board_only');
    for (const body of [{}, { title: '' }, { subject_mode: 'chemistry' }]) {
      const bad = await api.request('PATCH', `/lessons/${bl.id}`, { key: boardOnly.key, body });
      expect(bad.status, JSON.stringify(body)).toBe(422);
    }
    expect((await api.request('GET', `/lessons/${bl.id}`, { key: boardOnly.key })).body).toMatchObject({ title: 'L', mode: 'board_only', subject_mode: 'generic' });
    expect((await api.request('PATCH', `/lessons/${bl.id}`, { key: p.key, body: { title: 'x' } })).status).toBe(404);
    await api.request('DELETE', `/lessons/${bl.id}`, { key: boardOnly.key });
    expect((await api.request('PATCH', `/lessons/${bl.id}`, { key: boardOnly.key, body: { title: 'x' } })).status).toBe(410);
  });
});

describe('GET /lessons without external_id', () => {
  it('lists newest first page by page with starting_after, filters by status and created range, and shows people_now and session_running', async () => {
    const p = await partner();
    const made: string[] = [];
    for (let i = 0; i < 7; i++) {
      made.unshift((await p.create({ title: `L${i}` })).id);
      clock.advance(60_000);
    }
    const [live, ended, archived] = [made[0], made[1], made[2]];
    await sql`UPDATE lessons SET started_at = now(), ended_at = NULL WHERE id = ${live}`;
    await sql`UPDATE lessons SET started_at = now() - interval '1 hour', ended_at = now() WHERE id = ${ended}`;
    await api.request('DELETE', `/lessons/${archived}`, { key: p.key });
    const c = await join(gw.wsUrl(await p.link(live, 'a')));
    await gw.settle();

    const ids: string[] = [];
    let next: string | null = '/lessons?limit=2';
    while (next) {
      const res = await api.request('GET', next.replace('/api/partner/v1', ''), { key: p.key });
      expect(res.status).toBe(200);
      ids.push(...res.body.map((l: any) => l.id));
      next = res.headers.get('link')?.match(/<([^>]+)>; rel="next"/)?.[1] ?? null;
    }
    expect(ids).toEqual(made.filter((id) => id !== archived));

    const status = async (s: string) => (await api.request('GET', `/lessons?status=${s}`, { key: p.key })).body;
    const liveList = await status('live');
    expect(liveList.map((l: any) => [l.id, l.session_running, l.people_now])).toEqual([[live, true, 1]]);
    expect((await status('ended')).map((l: any) => l.id)).toEqual([ended]);
    expect((await status('archived')).map((l: any) => l.id)).toEqual([archived]);
    expect((await status('never_started')).map((l: any) => l.id)).toEqual(made.slice(3));
    expect((await status('never_started'))[0]).toMatchObject({ session_running: false, people_now: 0 });

    const from = new Date(clock.now().getTime() - 4 * 60_000 - 1).toISOString();
    const to = new Date(clock.now().getTime() - 2 * 60_000 + 1).toISOString();
    const ranged = await api.request('GET', `/lessons?created[gte]=${from}&created[lt]=${to}`, { key: p.key });
    expect(ranged.body.map((l: any) => l.id)).toEqual([made[1], made[3]]);
    expect((await api.request('GET', '/lessons?status=running', { key: p.key })).status).toBe(422);
    expect((await api.request('GET', '/lessons?starting_after=lsn_unknown', { key: p.key })).status).toBe(400);
    // the external_id form keeps its behaviour: archived ones included
    const byExt = await api.request('GET', '/lessons?external_id=nope', { key: p.key });
    expect(byExt.body).toEqual([]);
    await c.close();
    await gw.settle();
  });
});
