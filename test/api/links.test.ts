import { beforeAll, describe, expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { archiveLesson } from '../../src/domain/lessons.js';
import { LINK_ISSUED_CHANNEL } from '../../src/db/channels.js';
import { resolveLinkToken } from '../../src/domain/links.js';
import { ManualClock } from '../../src/lib/clock.js';
import { apiError, startTestApi } from '../helpers/api.js';
import { isolatedEnv } from '../helpers/isolation.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';

const clock = new ManualClock(Date.parse('2026-05-01T12:00:00Z'));
// a database of its own: a test counts the link announcements of its database, and a file running
// beside it in the shared one issues links too
const api = await startTestApi({ clock, env: { ...(await isolatedEnv()), EMBED_BASE_URL: 'https://embed.example.com/' } });
let p: PartnerFixture;
let lessonId: string;
beforeAll(async () => {
  p = await partnerFactory(api.deps.sql);
  lessonId = (await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Links' } })).body.id;
});

const user = { id: 'partner-user-42', name: 'Ann Teacher', role: 'teacher' };

describe('POST /lessons/{id}/links', () => {
  it('issues a link with url, token and expires_at 180 minutes ahead by default', async () => {
    const res = await api.request('POST', `/lessons/${lessonId}/links`, { key: p.apiKey, body: { user } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['expires_at', 'id', 'person', 'token', 'url']);
    expect(res.body.id).toMatch(/^lnk_[A-Za-z0-9]{22}$/);
    expect(res.body.person).toMatch(/^psn_[A-Za-z0-9_-]{22}$/);
    expect(res.body.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(res.body.url).toBe(`https://embed.example.com/embed/${res.body.token}`);
    expect(res.body.expires_at).toBe(new Date(clock.now().getTime() + 180 * 60_000).toISOString());
  });

  it('honours ttl_minutes 15-720 and rejects values outside with 422', async () => {
    for (const ttl of [15, 720]) {
      const res = await api.request('POST', `/lessons/${lessonId}/links`, { key: p.apiKey, body: { user, ttl_minutes: ttl } });
      expect(res.status).toBe(201);
      expect(res.body.expires_at).toBe(new Date(clock.now().getTime() + ttl * 60_000).toISOString());
    }
    for (const ttl of [14, 721, 30.5, '60']) {
      const res = await api.request('POST', `/lessons/${lessonId}/links`, { key: p.apiKey, body: { user, ttl_minutes: ttl } });
      expect(res.status, String(ttl)).toBe(422);
      expect(res.body.detail[0].loc).toEqual(['body', 'ttl_minutes']);
    }
  });

  it('validates user.id 1-128, user.name 1-60 and role, listing each failing field', async () => {
    const ok = await api.request('POST', `/lessons/${lessonId}/links`, {
      key: p.apiKey,
      body: { user: { id: 'i'.repeat(128), name: 'n'.repeat(60), role: 'student' } },
    });
    expect(ok.status).toBe(201);
    const bad = await api.request('POST', `/lessons/${lessonId}/links`, {
      key: p.apiKey,
      body: { user: { id: 'i'.repeat(129), name: 'n'.repeat(61), role: 'admin' } },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((d: { loc: string[] }) => d.loc.join('.')).sort()).toEqual(['body.user.id', 'body.user.name', 'body.user.role']);
    const empty = await api.request('POST', `/lessons/${lessonId}/links`, { key: p.apiKey, body: { user: { id: '', name: '', role: 'student' } } });
    expect(empty.body.detail.map((d: { loc: string[] }) => d.loc.join('.')).sort()).toEqual(['body.user.id', 'body.user.name']);
    const none = await api.request('POST', `/lessons/${lessonId}/links`, { key: p.apiKey, body: {} });
    expect(none.body.detail.map((d: { loc: string[] }) => d.loc.join('.'))).toEqual(['body.user']);
  });

  it('stores neither the token nor the partner user id, only hashes; the same person hashes alike across lessons', async () => {
    const other = (await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Other' } })).body.id;
    const a = await api.request('POST', `/lessons/${lessonId}/links`, { key: p.apiKey, body: { user } });
    const b = await api.request('POST', `/lessons/${other}/links`, { key: p.apiKey, body: { user } });
    const rows = await api.deps.sql`SELECT * FROM links WHERE partner_id = ${p.partner.id}`;
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(user.id);
    expect(dump).not.toContain(a.body.token);
    const ra = await resolveLinkToken(api.deps.sql, a.body.token);
    const rb = await resolveLinkToken(api.deps.sql, b.body.token);
    expect(ra!.user_hash).toBe(rb!.user_hash);
    expect(ra!.user_hash).toBe(createHmac('sha256', p.partner.user_hash_key).update(user.id).digest('hex'));
    expect(ra).toMatchObject({ lesson_id: lessonId, name: user.name, role: 'teacher', archived: false });
  });

  it('hashes the same user id differently at another partner', async () => {
    const q = await partnerFactory(api.deps.sql);
    const ql = (await api.request('POST', '/lessons', { key: q.apiKey, body: { title: 'Q' } })).body.id;
    const a = await api.request('POST', `/lessons/${lessonId}/links`, { key: p.apiKey, body: { user } });
    const b = await api.request('POST', `/lessons/${ql}/links`, { key: q.apiKey, body: { user } });
    const [ra, rb] = await Promise.all([resolveLinkToken(api.deps.sql, a.body.token), resolveLinkToken(api.deps.sql, b.body.token)]);
    expect(ra!.user_hash).not.toBe(rb!.user_hash);
  });

  it('answers 402 minutes_exhausted and issues nothing while the balance is at or below zero', async () => {
    const broke = await partnerFactory(api.deps.sql, { minutes: 0 });
    const l = (await api.request('POST', '/lessons', { key: broke.apiKey, body: { title: 'x' } })).body.id;
    const res = await api.request('POST', `/lessons/${l}/links`, { key: broke.apiKey, body: { user } });
    expect(res.status).toBe(402);
    expect(res.body).toEqual(apiError('minutes_exhausted'));
    const [count] = await api.deps.sql`SELECT count(*)::int AS n FROM links WHERE lesson_id = ${l}`;
    expect(count.n).toBe(0);
  });

  it('answers 410 and issues and announces nothing when the lesson is deleted while the link is being issued', async () => {
    const { sql } = api.deps;
    const l = (await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Deleted meanwhile' } })).body.id;
    const announced: string[] = [];
    const listening = await sql.listen(LINK_ISSUED_CHANNEL, (payload) => announced.push(payload));
    try {
      let commitDelete!: () => void;
      const deleting = sql.begin(async (tx) => {
        await archiveLesson(tx, p.partner.id, l, clock.now());
        await new Promise<void>((r) => (commitDelete = r));
      });
      await expect.poll(() => commitDelete).toBeDefined();
      // the request finds the lesson live (the delete is not committed) and waits at the insert
      const issuing = api.request('POST', `/lessons/${l}/links`, { key: p.apiKey, body: { user } });
      await expect
        .poll(async () => (await sql`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO links%'`).length)
        .toBe(1);
      commitDelete();
      await deleting;
      const res = await issuing;
      expect(res.status).toBe(410);
      expect(res.body.detail.code).toBe('archived');
      expect(await sql`SELECT 1 FROM links WHERE lesson_id = ${l}`).toHaveLength(0);
      // an announcement would have arrived with the commit; a link issued afterwards arrives after it
      const other = (await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Live' } })).body.id;
      expect((await api.request('POST', `/lessons/${other}/links`, { key: p.apiKey, body: { user } })).status).toBe(201);
      await expect.poll(() => announced.length).toBe(1);
      expect(JSON.parse(announced[0]).link.lesson_id).toBe(other);
    } finally {
      await listening.unlisten();
    }
  });
});
