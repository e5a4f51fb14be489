import { describe, expect, it } from 'vitest';
import { partnerRoutes } from '../../src/api/routes/index.js';
import { startTestApi } from '../helpers/api.js';
import { partnerFactory } from '../helpers/factories.js';

const api = await startTestApi();

describe('the rate limit covers every partner route', () => {
  it('counts a request to any route against its key, whatever it answers (an unknown lesson, a bad body)', async () => {
    const p = await partnerFactory(api.deps.sql);
    const remaining = (res: { headers: Headers }) => Number(/;r=(\d+);/.exec(res.headers.get('ratelimit') ?? '')?.[1]);
    const first = remaining(await api.request('GET', '/balance', { key: p.apiKey }));
    let last = first;
    for (const r of partnerRoutes) {
      const res = await api.request(r.method.toUpperCase(), r.path.replace(/\{(\w+)\}/g, 'x'), { key: p.apiKey, body: r.body ? {} : undefined });
      const where = `${r.method} ${r.path} (${res.status})`;
      expect(res.headers.get('ratelimit-policy'), where).toMatch(/^"default";q=\d+;w=60$/);
      // the allowance reported never grows between requests (the limiter hands out small reservations,
      // so one request may show a step of more than one)
      expect(remaining(res), where).toBeLessThanOrEqual(last);
      last = remaining(res);
    }
    expect(first - last).toBeGreaterThanOrEqual(partnerRoutes.length - 10);
  });
});
