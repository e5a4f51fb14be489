import { describe, expect, it } from 'vitest';
import { startTestApi } from '../helpers/api.js';

const api = await startTestApi();

describe('health', () => {
  it('GET /healthz answers 200 without a key', async () => {
    const res = await api.request('GET', '/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('GET /readyz answers 200 when Postgres and Redis answer', async () => {
    const res = await api.request('GET', '/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ready: true, postgres: 'ok', redis: 'ok' });
  });
});
