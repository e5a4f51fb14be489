import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApi } from '../helpers/api.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';

/** GET /lessons/{id}/links, DELETE /lessons/{id}/links/{link_id}, POST /lessons/{id}/participants/{person}/remove: the API's rules. */
const clock = new ManualClock(Date.parse('2026-05-02T12:00:00Z'));
const api = await startTestApi({ clock });
let p: PartnerFixture;
let other: PartnerFixture;
beforeAll(async () => {
  p = await partnerFactory(api.deps.sql);
  other = await partnerFactory(api.deps.sql);
});

const newLesson = async () => (await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Links' } })).body.id as string;
const issue = async (lessonId: string, id: string, name = id) =>
  (await api.request('POST', `/lessons/${lessonId}/links`, { key: p.apiKey, body: { user: { id, name, role: 'student' } } })).body;

describe('links of a lesson', () => {
  it('lists every link oldest first with its person, never a token; the same user.id is the same person in every lesson of the partner, another at another partner', async () => {
    const lessonId = await newLesson();
    const a = await issue(lessonId, 'u-1', 'Ann');
    clock.advance(1000);
    const b = await issue(lessonId, 'u-2', 'Bob');
    const res = await api.request('GET', `/lessons/${lessonId}/links`, { key: p.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { id: a.id, person: a.person, name: 'Ann', role: 'student', created_at: new Date(clock.now().getTime() - 1000).toISOString(), expires_at: a.expires_at, revoked_at: null, last_used_at: null },
      expect.objectContaining({ id: b.id, person: b.person, name: 'Bob' }),
    ]);
    expect(res.text).not.toContain(a.token);
    expect((await issue(await newLesson(), 'u-1')).person).toBe(a.person);
    const theirLesson = (await api.request('POST', '/lessons', { key: other.apiKey, body: { title: 'x' } })).body.id;
    const theirs = (await api.request('POST', `/lessons/${theirLesson}/links`, { key: other.apiKey, body: { user: { id: 'u-1', name: 'A', role: 'student' } } })).body;
    expect(theirs.person).not.toBe(a.person);
  });

  it('revokes a link once (a second DELETE answers 204 and keeps the first time); an unknown link, or one of another lesson, is 404', async () => {
    const lessonId = await newLesson();
    const a = await issue(lessonId, 'u-1');
    const first = clock.now().toISOString();
    expect((await api.request('DELETE', `/lessons/${lessonId}/links/${a.id}`, { key: p.apiKey })).status).toBe(204);
    clock.advance(5000);
    expect((await api.request('DELETE', `/lessons/${lessonId}/links/${a.id}`, { key: p.apiKey })).status).toBe(204);
    expect((await api.request('GET', `/lessons/${lessonId}/links`, { key: p.apiKey })).body[0].revoked_at).toBe(first);
    const elsewhere = await newLesson();
    const res = await api.request('DELETE', `/lessons/${elsewhere}/links/${a.id}`, { key: p.apiKey });
    expect(res.status).toBe(404);
    expect(res.body.detail).toEqual({ code: 'not_found', message: 'Link not found' });
    expect((await api.request('DELETE', `/lessons/${lessonId}/links/${'x'.repeat(65)}`, { key: p.apiKey })).status).toBe(404);
  });

  it('removes a person by reference, replays a retried removal under its Idempotency-Key, and answers 404 for a person without a link in the lesson', async () => {
    const lessonId = await newLesson();
    const a = await issue(lessonId, 'u-1');
    const headers = { 'idempotency-key': 'remove-1' };
    const first = await api.request('POST', `/lessons/${lessonId}/participants/${a.person}/remove`, { key: p.apiKey, headers });
    expect(first.status).toBe(204);
    const again = await api.request('POST', `/lessons/${lessonId}/participants/${a.person}/remove`, { key: p.apiKey, headers });
    expect(again.status).toBe(204);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const rows = await api.deps.sql`SELECT removed_by FROM lesson_removals WHERE lesson_id = ${lessonId}`;
    expect(rows).toEqual([{ removed_by: 'partner' }]);
    const stranger = (await issue(await newLesson(), 'u-9')).person;
    expect((await api.request('POST', `/lessons/${lessonId}/participants/${stranger}/remove`, { key: p.apiKey })).body.detail.code).toBe('not_found');
    expect((await api.request('POST', `/lessons/${lessonId}/participants/not-a-person/remove`, { key: p.apiKey })).status).toBe(404);
  });

  it("answers 404 on every new route for another partner's lesson and 410 for an archived one", async () => {
    const lessonId = await newLesson();
    const a = await issue(lessonId, 'u-1');
    const routes: [string, string][] = [
      ['GET', `/lessons/${lessonId}/links`],
      ['DELETE', `/lessons/${lessonId}/links/${a.id}`],
      ['POST', `/lessons/${lessonId}/participants/${a.person}/remove`],
      ['GET', `/lessons/${lessonId}/attendance`],
    ];
    for (const [m, path] of routes) expect((await api.request(m, path, { key: other.apiKey })).body.detail.code, `${m} ${path}`).toBe('not_found');
    await api.request('DELETE', `/lessons/${lessonId}`, { key: p.apiKey });
    for (const [m, path] of routes) {
      const res = await api.request(m, path, { key: p.apiKey });
      expect(res.status, `${m} ${path}`).toBe(410);
    }
    expect((await api.deps.sql`SELECT revoked_at FROM links WHERE id = ${a.id}`)[0].revoked_at).toBeNull();
  });
});
