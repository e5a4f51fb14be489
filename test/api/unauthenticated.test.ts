import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiApp } from '../../src/api/app.js';
import { AuthCache } from '../../src/api/authCache.js';
import { runAdmin } from '../../src/cli/admin.js';
import { generateApiKey } from '../../src/domain/apiKeys.js';
import { fileDeps, ManualClock } from '../helpers/deps.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { isolatedEnv } from '../helpers/isolation.js';
import { apiError } from '../helpers/api.js';

/**
 * Requests without a valid key are cheap (unknown keys are
 * remembered, so a repeated one costs no Postgres lookup) and limited per
 * client address (429 with Retry-After past RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE),
 * and the address is taken from X-Forwarded-For only as far as TRUST_PROXY_HOPS
 * says. A real API (Koa, Postgres, Redis) on a loopback port; the AuthCache is
 * built here only to read how many lookups it sent to Postgres. Each app has a
 * database of its own: a key created by a test file running beside this one
 * would notify `auth_changed` and make the cache look up again, which is right
 * but not what these tests count.
 */
const LIMIT = 50;

async function startApp(env: Record<string, string>) {
  const clock = new ManualClock(Date.now());
  const deps = fileDeps({ clock, env: { ...(await isolatedEnv()), RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: String(LIMIT), ...env } });
  const cache = new AuthCache(deps);
  await cache.start();
  const server = createApiApp(deps, cache).listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: 16, pipelining: 1 });
  afterAll(async () => {
    await pool.close();
    await new Promise((r) => server.close(r));
    await cache.stop();
  });
  async function get(key: string | null, from?: string) {
    const headers: Record<string, string> = {};
    if (key) headers.authorization = `Bearer ${key}`;
    if (from) headers['x-forwarded-for'] = from;
    const res = await pool.request({ method: 'GET', path: '/api/partner/v1/balance', headers });
    const body = (await res.body.json()) as any;
    return { status: res.statusCode, retryAfter: res.headers['retry-after'], body };
  }
  return { deps, clock, cache, get };
}

/** A fresh client address behind the proxy, so every test starts with a full allowance. */
let n = 0;
const address = () => `198.51.100.${++n}`;

describe('unauthenticated traffic behind one trusted proxy (TRUST_PROXY_HOPS=1)', async () => {
  const api = await startApp({ TRUST_PROXY_HOPS: '1' });
  let p: PartnerFixture;
  beforeAll(async () => {
    p = await partnerFactory(api.deps.sql);
  });

  it('4,000 requests with unknown keys from one address cost at most the allowance in Postgres lookups and get 429 with Retry-After past it', async () => {
    const from = address();
    const before = api.cache.lookupsMade;
    const statuses = new Map<number, number>();
    let limited: Awaited<ReturnType<typeof api.get>> | undefined;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 4000 }, async () => {
        // a fresh, well-formed key each time: the negative cache cannot help, only the limit can
        const r = await api.get(generateApiKey(), from);
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status === 429) limited = r;
      }),
    );
    const refilled = Math.ceil(((Date.now() - started) / 60_000) * LIMIT) + 1;
    const unauthorized = statuses.get(401) ?? 0;
    console.log(`4,000 unknown keys from one address in ${Date.now() - started} ms: ${JSON.stringify(Object.fromEntries(statuses))}, ${api.cache.lookupsMade - before} Postgres lookups`);
    expect([...statuses.keys()].sort()).toEqual([401, 429]);
    expect(unauthorized).toBeGreaterThanOrEqual(LIMIT);
    // A Redis call that takes over 250 ms (a loaded machine) falls back to the process's own
    // allowance (fail open, docs/api-decisions.md): at most one more allowance per process.
    expect(unauthorized).toBeLessThanOrEqual(2 * LIMIT + refilled);
    expect(api.cache.lookupsMade - before).toBe(unauthorized);
    expect(limited!.body).toEqual(apiError('rate_limited'));
    expect(Number(limited!.retryAfter)).toBeGreaterThanOrEqual(1);
  });

  it('a malformed key or none costs no lookup at all', async () => {
    const from = address();
    const before = api.cache.lookupsMade;
    for (const key of [null, 'not-a-key', `wbk_${'!'.repeat(32)}`, `wbk_${'A'.repeat(33)}`]) expect((await api.get(key, from)).status).toBe(401);
    expect(api.cache.lookupsMade).toBe(before);
  });

  it('a repeated unknown key costs one lookup, until the key memory expires (60 s)', async () => {
    const from = address();
    const key = generateApiKey();
    const before = api.cache.lookupsMade;
    for (let i = 0; i < 20; i++) expect((await api.get(key, from)).status).toBe(401);
    expect(api.cache.lookupsMade - before).toBe(1);
    api.clock.advance(61_000);
    expect((await api.get(key, from)).status).toBe(401);
    expect(api.cache.lookupsMade - before).toBe(2);
  });

  it('concurrent requests with the same uncached key share one lookup, from any number of addresses', async () => {
    const key = generateApiKey();
    const before = api.cache.lookupsMade;
    const results = await Promise.all(Array.from({ length: 200 }, () => api.get(key, address())));
    expect(results.every((r) => r.status === 401)).toBe(true);
    expect(api.cache.lookupsMade - before).toBe(1);
  });

  it('creating a key makes every process forget the unknown keys it remembered', async () => {
    const from = address();
    const key = generateApiKey();
    expect((await api.get(key, from)).status).toBe(401);
    const before = api.cache.lookupsMade;
    expect((await api.get(key, from)).status).toBe(401);
    expect(api.cache.lookupsMade).toBe(before);
    await runAdmin(api.deps.sql, ['key', 'create', p.partner.id]);
    // the notification arrives within milliseconds of the commit
    const deadline = Date.now() + 2000;
    while (api.cache.lookupsMade === before && Date.now() < deadline) {
      expect((await api.get(key, from)).status).toBe(401);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(api.cache.lookupsMade).toBe(before + 1);
  });

  it('a flooded address keeps serving a key this process found valid, even past its cache entry; an unseen key waits', async () => {
    const from = address();
    const q = await partnerFactory(api.deps.sql);
    const unseen = await partnerFactory(api.deps.sql);
    expect((await api.get(p.apiKey, from)).status).toBe(200);
    expect((await api.get(q.apiKey, from)).status).toBe(200);
    const flood = await Promise.all(Array.from({ length: LIMIT + 20 }, () => api.get(generateApiKey(), from)));
    expect(flood.filter((r) => r.status === 429).length).toBeGreaterThanOrEqual(15);
    expect((await api.get(generateApiKey(), from)).status).toBe(429);
    expect((await api.get(null, from)).status).toBe(429);
    // cached: no lookup, no limit
    expect((await api.get(p.apiKey, from)).status).toBe(200);
    // the 30 s cache entry expired: looked up again although the address is over its allowance
    api.clock.advance(31_000);
    const before = api.cache.lookupsMade;
    expect((await api.get(q.apiKey, from)).status).toBe(200);
    expect(api.cache.lookupsMade).toBe(before + 1);
    // a key this process never saw valid is not looked up for a flooded address (documented)
    expect((await api.get(unseen.apiKey, from)).status).toBe(429);
    expect(api.cache.lookupsMade).toBe(before + 1);
    // ... and is served from any other address
    expect((await api.get(unseen.apiKey, address())).status).toBe(200);
  });

  it('counts the address the trusted proxy wrote: entries the client forges to the left change nothing', async () => {
    const from = address();
    const forged = await Promise.all(
      Array.from({ length: LIMIT + 10 }, () => api.get(null, `10.${randomBytes(1)[0]}.${randomBytes(1)[0]}.1, ${from}`)),
    );
    expect(forged.filter((r) => r.status === 429).length).toBeGreaterThanOrEqual(5);
    expect((await api.get(null, `203.0.113.9, ${from}`)).status).toBe(429);
    expect((await api.get(null, `${from}, ${address()}`)).status).toBe(401);
  });
});

describe('unauthenticated traffic without a proxy (TRUST_PROXY_HOPS=0, the default)', async () => {
  const api = await startApp({ TRUST_PROXY_HOPS: '0' });

  it('ignores X-Forwarded-For: the TCP peer is the address', async () => {
    const results = await Promise.all(Array.from({ length: LIMIT + 10 }, () => api.get(null, address())));
    expect(results.filter((r) => r.status === 429).length).toBeGreaterThanOrEqual(5);
    expect((await api.get(null, address())).status).toBe(429);
  });
});
