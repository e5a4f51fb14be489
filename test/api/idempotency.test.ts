import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { purgeExpiredKeys } from '../../src/api/idempotency/store.js';
import { ManualClock } from '../../src/lib/clock.js';
import { apiError, startTestApi } from '../helpers/api.js';
import { partnerFactory } from '../helpers/factories.js';

const clock = new ManualClock(Date.parse('2026-06-01T10:00:00Z'));
const api = await startTestApi({ clock, env: { WEBHOOK_SECRET_KEYS: randomBytes(32).toString('base64') } });
const sql = api.deps.sql;

const countLessons = async (partnerId: string) =>
  (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM lessons WHERE partner_id = ${partnerId}`)[0].n;
const countLinks = async (lessonId: string) =>
  (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM links WHERE lesson_id = ${lessonId}`)[0].n;

describe('Idempotency-Key on POST (Stripe semantics, docs/api-decisions.md)', () => {
  it('a retry with the same key and body gets the first response, marked Idempotent-Replayed, and creates nothing more', async () => {
    const p = await partnerFactory(sql);
    const headers = { 'idempotency-key': 'create-lesson-1' };
    const first = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Algebra', mode: 'full' }, headers });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    // same fields in another order: the same request
    const again = await api.request('POST', '/lessons', { key: p.apiKey, body: { mode: 'full', title: 'Algebra' }, headers });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('content-type')).toMatch(/^application\/json/);
    expect(again.body).toEqual(first.body);
    expect(await countLessons(p.partner.id)).toBe(1);
    // without the header every POST creates
    await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Algebra', mode: 'full' } });
    expect(await countLessons(p.partner.id)).toBe(2);
  });

  it('the same key with another body, or on another route, is 409 idempotency_key_reused and changes nothing', async () => {
    const p = await partnerFactory(sql);
    const headers = { 'idempotency-key': 'k-reuse' };
    const first = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'One' }, headers });
    expect(first.status).toBe(201);
    const other = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Two' }, headers });
    expect(other.status).toBe(409);
    expect(other.body).toEqual(apiError('idempotency_key_reused'));
    const link = await api.request('POST', `/lessons/${first.body.id}/links`, {
      key: p.apiKey, body: { user: { id: 'u1', name: 'Ann', role: 'teacher' } }, headers,
    });
    expect(link.status).toBe(409);
    expect(await countLessons(p.partner.id)).toBe(1);
    expect(await countLinks(first.body.id)).toBe(0);
  });

  it('concurrent duplicates wait for the first and get its response: one lesson, one link', async () => {
    const p = await partnerFactory(sql);
    const headers = { 'idempotency-key': 'burst' };
    const results = await Promise.all(
      Array.from({ length: 8 }, () => api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Burst' }, headers })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(201));
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    expect(results.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(7);
    expect(await countLessons(p.partner.id)).toBe(1);

    const lessonId = results[0].body.id;
    const body = { user: { id: 'u1', name: 'Ann', role: 'teacher' } };
    const links = await Promise.all(
      Array.from({ length: 5 }, () =>
        api.request('POST', `/lessons/${lessonId}/links`, { key: p.apiKey, body, headers: { 'idempotency-key': 'link-1' } }),
      ),
    );
    expect(links.map((r) => r.status)).toEqual(Array(5).fill(201));
    expect(new Set(links.map((r) => r.body.token)).size).toBe(1);
    expect(await countLinks(lessonId)).toBe(1);
    // the stored response holds the token, which is otherwise never stored: it is sealed
    const [row] = await sql<{ body: string }[]>`SELECT body FROM idempotency_keys WHERE partner_id = ${p.partner.id} AND key = 'link-1'`;
    expect(row.body).toMatch(/^gcm1\./);
    expect(row.body).not.toContain(links[0].body.token);
  });

  it('keeps a response 24 hours: after that the key is new again', async () => {
    const p = await partnerFactory(sql);
    const headers = { 'idempotency-key': 'daily' };
    const first = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Day' }, headers });
    clock.advance(24 * 3600_000 - 1000);
    const replay = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Day' }, headers });
    expect(replay.body.id).toBe(first.body.id);
    clock.advance(1000);
    const fresh = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Day' }, headers });
    expect(fresh.status).toBe(201);
    expect(fresh.headers.get('idempotent-replayed')).toBeNull();
    expect(fresh.body.id).not.toBe(first.body.id);
    expect(await countLessons(p.partner.id)).toBe(2);
  });

  it('expired keys are purged', async () => {
    const p = await partnerFactory(sql);
    await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Old' }, headers: { 'idempotency-key': 'old' } });
    const keys = async () => (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM idempotency_keys WHERE partner_id = ${p.partner.id}`)[0].n;
    expect(await keys()).toBe(1);
    await purgeExpiredKeys(sql, new Date(clock.now().getTime() + 24 * 3600_000 - 1));
    expect(await keys()).toBe(1);
    await purgeExpiredKeys(sql, new Date(clock.now().getTime() + 24 * 3600_000));
    expect(await keys()).toBe(0);
  });

  it('an error the request produced is replayed too; a 422 (nothing ran) is not stored, so a corrected retry may reuse the key', async () => {
    const p = await partnerFactory(sql);
    const created = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'X', external_id: 'dup' } });
    expect(created.status).toBe(201);
    const headers = { 'idempotency-key': 'conflict' };
    const conflict = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Y', external_id: 'dup' }, headers });
    expect(conflict.status).toBe(409);
    expect(conflict.body.detail.code).toBe('conflict');
    // archive the first: the same request would now succeed, but the key answers what it answered
    await api.request('DELETE', `/lessons/${created.body.id}`, { key: p.apiKey });
    const replay = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Y', external_id: 'dup' }, headers });
    expect(replay.status).toBe(409);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');

    const h2 = { 'idempotency-key': 'fix-me' };
    const bad = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: '' }, headers: h2 });
    expect(bad.status).toBe(422);
    const fixed = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Fixed' }, headers: h2 });
    expect(fixed.status).toBe(201);
    expect(fixed.headers.get('idempotent-replayed')).toBeNull();
  });

  it('keys belong to one partner; a malformed or blank key is 400 bad_request and creates nothing', async () => {
    const a = await partnerFactory(sql);
    const b = await partnerFactory(sql);
    const headers = { 'idempotency-key': 'shared-name' };
    const ra = await api.request('POST', '/lessons', { key: a.apiKey, body: { title: 'A' }, headers });
    const rb = await api.request('POST', '/lessons', { key: b.apiKey, body: { title: 'A' }, headers });
    expect(rb.status).toBe(201);
    expect(rb.body.id).not.toBe(ra.body.id);
    for (const bad of ['x'.repeat(256), 'has space', 'ключ', '   ', '']) {
      const res = await api.request('POST', '/lessons', { key: a.apiKey, body: { title: 'A' }, headers: { 'idempotency-key': bad } }).catch(() => null);
      if (!res) continue; // fetch itself refuses non-ASCII header values
      expect(res.status, bad).toBe(400);
      expect(res.body.detail.code).toBe('bad_request');
    }
    expect(await countLessons(a.partner.id)).toBe(1);
  });
});
