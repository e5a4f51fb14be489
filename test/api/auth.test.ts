import { Client } from 'undici';
import { beforeAll, describe, expect, it } from 'vitest';
import { runAdmin } from '../../src/cli/admin.js';
import { apiError, startTestApi } from '../helpers/api.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';

const api = await startTestApi();
let p: PartnerFixture;
beforeAll(async () => {
  p = await partnerFactory(api.deps.sql);
});

const expect401 = (res: { status: number; body: unknown }) => {
  expect(res.status).toBe(401);
  expect(res.body).toEqual(apiError('unauthorized'));
};

/** Polls for at most 1 s: the cache invalidation is asynchronous but must land promptly. */
async function eventually401(key: string) {
  const deadline = Date.now() + 1000;
  for (;;) {
    const res = await api.request('GET', '/balance', { key });
    if (res.status === 401 || Date.now() > deadline) return res;
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('API key authentication', () => {
  it('accepts a live key', async () => {
    expect((await api.request('GET', '/balance', { key: p.apiKey })).status).toBe(200);
  });

  it('answers 401 unauthorized without a key, with a malformed or unknown key, or another scheme', async () => {
    expect401(await api.request('GET', '/balance'));
    expect401(await api.request('GET', '/balance', { key: 'not-a-key' }));
    expect401(await api.request('GET', '/balance', { key: 'wbk_' + 'A'.repeat(32) }));
    expect401(await api.request('GET', '/balance', { headers: { authorization: `Basic ${p.apiKey}` } }));
    expect401(await api.request('GET', '/balance', { headers: { authorization: p.apiKey } }));
  });

  it('answers 401 on every route, before validation, and creates nothing', async () => {
    expect401(await api.request('POST', '/lessons', { body: { title: 'x', external_id: 'noauth' } }));
    expect401(await api.request('POST', '/lessons', { body: {} }));
    expect401(await api.request('GET', '/lessons/lsn_x'));
    expect401(await api.request('DELETE', '/lessons/lsn_x'));
    expect401(await api.request('POST', '/lessons/lsn_x/links', { body: {} }));
    const list = await api.request('GET', '/lessons?external_id=noauth', { key: p.apiKey });
    expect(list.body).toEqual([]);
  });

  it('runs no route without the key check: the prefix in other letter cases is no route (404), on every route, with a key or without', async () => {
    const { partnerRoutes } = await import('../../src/api/routes/index.js');
    const variants = ['/API/partner/v1', '/api/Partner/v1', '/api/partner/V1', '/Api/partner/v1'];
    for (const r of partnerRoutes) {
      const path = r.path.replace(/\{(\w+)\}/g, 'x');
      for (const prefix of variants) {
        for (const key of [null, p.apiKey]) {
          const res = await fetch(`${api.base}${prefix}${path}`, {
            method: r.method.toUpperCase(),
            headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), 'content-type': 'application/json' },
            body: r.method === 'post' ? '{}' : undefined,
          });
          expect(res.status, `${r.method} ${prefix}${path}`).toBe(404);
          expect(await res.json()).toEqual(apiError('not_found'));
        }
      }
    }
    // a route's own path in another case is an unknown route too, as any other
    for (const key of [null, p.apiKey]) expect((await api.request('GET', '/Balance', { key })).status).toBe(404);
  });

  it('answers 401 for a revoked key while the partner’s other keys keep working', async () => {
    const { api_key: second } = (await runAdmin(api.deps.sql, ['key', 'create', p.partner.id])) as { api_key: string };
    expect((await api.request('GET', '/balance', { key: second })).status).toBe(200);
    await runAdmin(api.deps.sql, ['key', 'revoke'], new Date(), second);
    // The API's key cache hears the revocation through NOTIFY, delivered within milliseconds of commit.
    expect401(await eventually401(second));
    expect((await api.request('GET', '/balance', { key: p.apiKey })).status).toBe(200);
  });

  it('answers 401 for every key of a suspended partner, and works again after resume', async () => {
    const q = await partnerFactory(api.deps.sql);
    await runAdmin(api.deps.sql, ['partner', 'suspend', q.partner.id]);
    expect401(await eventually401(q.apiKey));
    await runAdmin(api.deps.sql, ['partner', 'resume', q.partner.id]);
    expect((await api.request('GET', '/balance', { key: q.apiKey })).status).toBe(200);
  });

  it('turns a key away on the keep-alive connection that used it, once it is revoked or its partner suspended', async () => {
    // one keep-alive connection for every request, as a partner's client keeps one
    const conn = new Client(api.base, { pipelining: 1 });
    const sockets = new Set<unknown>();
    conn.on('connect', (_origin, [client]) => sockets.add(client));
    const balance = async (key: string) => {
      const res = await conn.request({ method: 'GET', path: '/api/partner/v1/balance', headers: { authorization: `Bearer ${key}` } });
      await res.body.dump();
      return res.statusCode;
    };
    try {
      const q = await partnerFactory(api.deps.sql);
      const { api_key: second } = (await runAdmin(api.deps.sql, ['key', 'create', q.partner.id])) as { api_key: string };
      expect([await balance(second), await balance(second), await balance(q.apiKey)]).toEqual([200, 200, 200]);
      /** polls for at most 1 s, like eventually401, on this connection */
      const until401 = async (key: string) => {
        let status = await balance(key);
        for (const deadline = Date.now() + 1000; status !== 401 && Date.now() < deadline; status = await balance(key)) await new Promise((r) => setTimeout(r, 10));
        return status;
      };
      await runAdmin(api.deps.sql, ['key', 'revoke'], new Date(), second);
      expect(await until401(second)).toBe(401);
      expect(await balance(q.apiKey)).toBe(200);
      await runAdmin(api.deps.sql, ['partner', 'suspend', q.partner.id]);
      expect(await until401(q.apiKey)).toBe(401);
      expect(await balance(p.apiKey)).toBe(200); // another partner's key on the same connection
      expect(sockets.size).toBe(1);
    } finally {
      await conn.close();
    }
  });

  it('stores keys only as hashes', async () => {
    const rows = await api.deps.sql`SELECT key_hash FROM api_keys WHERE partner_id = ${p.partner.id}`;
    const dump = JSON.stringify(await api.deps.sql`SELECT * FROM api_keys WHERE partner_id = ${p.partner.id}`);
    expect(rows.length).toBeGreaterThan(0);
    expect(dump).not.toContain(p.apiKey.slice(4));
  });

  it('does not depend on the Host header, so the legacy base address serves the same API', async () => {
    const res = await api.request('GET', '/balance', { key: p.apiKey, headers: { host: 'legacy.example.com' } });
    expect(res.status).toBe(200);
  });
});
