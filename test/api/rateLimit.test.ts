import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/lib/rateLimiter.js';
import { startApi } from '../../src/server.js';
import { fileDeps, makeDeps } from '../helpers/deps.js';
import { partnerFactory } from '../helpers/factories.js';
import { freePort, spawnService } from '../helpers/process.js';

const deps = fileDeps();

async function get(base: string, key: string) {
  const res = await fetch(`${base}/api/partner/v1/balance`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res;
}

describe('rate limit: per API key, shared by every API process through Redis', () => {
  it('lets exactly the limit through across two API processes, then answers 429 with Retry-After and RateLimit headers', async () => {
    const [portA, portB] = [await freePort(), await freePort()];
    const env = { ROLES: 'api', RATE_LIMIT_PER_MINUTE: '30' };
    await Promise.all([
      spawnService({ ...env, API_PORT: String(portA) }, `http://127.0.0.1:${portA}/healthz`),
      spawnService({ ...env, API_PORT: String(portB) }, `http://127.0.0.1:${portB}/healthz`),
    ]);
    const p = await partnerFactory(deps.sql);
    const other = await partnerFactory(deps.sql);
    const bases = [`http://127.0.0.1:${portA}`, `http://127.0.0.1:${portB}`];
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => get(bases[i % 2], p.apiKey)));
    const ok = results.filter((r) => r.status === 200);
    const limited = results.filter((r) => r.status === 429);
    expect(ok).toHaveLength(30);
    expect(limited).toHaveLength(10);
    const r429 = limited[0];
    expect(Number(r429.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(r429.headers.get('ratelimit-policy')).toBe('"default";q=30;w=60');
    expect(r429.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+$/);
    expect(ok[0].headers.get('ratelimit')).toMatch(/^"default";r=\d+;t=\d+$/);
    // another key is not affected
    expect((await get(bases[0], other.apiKey)).status).toBe(200);
  }, 60_000);

  it('refills continuously (GCRA) instead of resetting a fixed window: one more request per interval', async () => {
    const local = makeDeps({ env: { RATE_LIMIT_PER_MINUTE: '60' } }); // one per second
    const api = await startApi(local, 0);
    try {
      const base = `http://127.0.0.1:${api.port}`;
      const p = await partnerFactory(local.sql);
      const burst = await Promise.all(Array.from({ length: 65 }, () => get(base, p.apiKey)));
      expect(burst.filter((r) => r.status === 200)).toHaveLength(60);
      // A fixed window would let another 60 through at its boundary; GCRA lets one per second.
      await new Promise((r) => setTimeout(r, 1200));
      const after = [];
      for (let i = 0; i < 3; i++) after.push((await get(base, p.apiKey)).status);
      expect(after).toEqual([200, 429, 429]);
      const res = await fetch(`${base}/api/partner/v1/balance`, { headers: { authorization: `Bearer ${p.apiKey}` } });
      const body = await res.json();
      expect(body).toEqual({ detail: { code: 'rate_limited', message: expect.any(String) } });
    } finally {
      await api.close();
      await local.close();
    }
  });

  it('with Redis unreachable, keeps serving and enforces the limit in each process (fail open, documented)', async () => {
    const dead = makeDeps({ env: { REDIS_URL: 'redis://127.0.0.1:1/0', RATE_LIMIT_PER_MINUTE: '10' } });
    dead.redis.on('error', () => {});
    const api = await startApi(dead, 0);
    try {
      const base = `http://127.0.0.1:${api.port}`;
      const p = await partnerFactory(dead.sql);
      const results = [];
      for (let i = 0; i < 12; i++) results.push((await get(base, p.apiKey)).status);
      expect(results.filter((s) => s === 200)).toHaveLength(10);
      expect(results.filter((s) => s === 429)).toHaveLength(2);
      const ready = await fetch(`${base}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toEqual({ ready: false, postgres: 'ok', redis: expect.not.stringMatching(/^ok$/) });
    } finally {
      await api.close();
      await dead.close();
    }
  });
});

describe('rate limit under load: reservations (src/lib/rateLimiter.ts)', () => {
  it('a busy key reserves small batches, so a flood costs Redis a few calls, and two processes together never exceed the limit', async () => {
    // two limiters = two API processes sharing one Redis key; 1,000 per minute, so 1 % = 10 per reservation
    const key = `lease-${Date.now()}`;
    const a = new RateLimiter(deps.redis, 1000);
    const b = new RateLimiter(deps.redis, 1000);
    const started = Date.now();
    const decisions = await Promise.all(Array.from({ length: 1200 }, (_, i) => (i % 2 ? a : b).take(key)));
    const seconds = (Date.now() - started) / 1000;
    const allowed = decisions.filter((d) => d.allowed).length;
    // never more than the allowance plus what refilled meanwhile (1,000 per minute)
    expect(allowed).toBeLessThanOrEqual(1000 + Math.ceil((seconds * 1000) / 60));
    // at most one unused reservation per process is lost at the very end
    expect(allowed).toBeGreaterThanOrEqual(1000 - 2 * 10);
    // plain GCRA would have made 1,200 calls
    expect(a.redisCalls + b.redisCalls).toBeLessThan(300);
    // a refusal is remembered until GCRA allows again: more requests now cost Redis nothing
    const calls = a.redisCalls;
    const denied = await Promise.all(Array.from({ length: 50 }, () => a.take(key)));
    expect(denied.every((d) => !d.allowed && d.retryAfterMs > 0)).toBe(true);
    expect(a.redisCalls).toBe(calls);
  });

  it('a quiet key costs one Redis call per request and gets exactly the limit', async () => {
    const key = `quiet-${Date.now()}`;
    const limiter = new RateLimiter(deps.redis, 600); // 1 % = 6, but a quiet key reserves one at a time
    const first = await limiter.take(key);
    expect(first).toMatchObject({ allowed: true, remaining: 599 });
    await new Promise((r) => setTimeout(r, 1100)); // quiet: the next request reserves one again
    expect(await limiter.take(key)).toMatchObject({ allowed: true });
    expect(limiter.redisCalls).toBe(2);
  });
});
