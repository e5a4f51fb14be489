import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { startApi } from '../../src/server.js';
import { MAX_REQUEST_ID_LENGTH } from '../../src/api/middlewares/requestId.js';
import { makeDeps } from '../helpers/deps.js';

/**
 * The access log's request id is the response's X-Request-Id; one from the
 * request is taken only behind a trusted proxy (TRUST_PROXY_HOPS > 0) and only when it is short and
 * of a safe charset.
 */
async function api(hops: number) {
  let captured = '';
  const sink = new Writable({ write(chunk, _enc, cb) { captured += chunk; cb(); } });
  const base = makeDeps({ env: { TRUST_PROXY_HOPS: String(hops) } });
  const deps = { ...base, log: createLogger('info', sink) };
  const running = await startApi(deps, 0);
  afterAll(async () => { await running.close(); await base.close(); });
  return {
    async get(headers: Record<string, string> = {}) {
      const res = await fetch(`http://127.0.0.1:${running.port}/healthz`, { headers });
      await res.text();
      const id = res.headers.get('x-request-id')!;
      await new Promise((r) => setTimeout(r, 20));
      const line = captured.split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((l) => l.msg === 'request').at(-1);
      return { id, logged: line?.request_id as string };
    },
  };
}

const direct = await api(0);
const proxied = await api(1);

describe('request ids', () => {
  it('without a trusted proxy: a new id each time, the same in the header and the access log; the client’s is ignored', async () => {
    const a = await direct.get();
    const b = await direct.get({ 'x-request-id': 'client-chosen-id' });
    expect(a.id).toMatch(/^[A-Za-z0-9]{16}$/);
    expect(a.logged).toBe(a.id);
    expect(b.id).not.toBe('client-chosen-id');
    expect(b.logged).toBe(b.id);
    expect(b.id).not.toBe(a.id);
  });

  it('behind a trusted proxy (TRUST_PROXY_HOPS=1): the proxy’s id is echoed and logged', async () => {
    for (const given of ['6f1c1d1e-8a3b-4c1e-9f00-0123456789ab', 'req:abc.DEF_1/2+3=@', 'x'.repeat(MAX_REQUEST_ID_LENGTH)]) {
      const r = await proxied.get({ 'x-request-id': given });
      expect(r.id).toBe(given);
      expect(r.logged).toBe(given);
    }
  });

  it('behind a trusted proxy: an id too long or of unsafe characters is replaced by a new one', async () => {
    for (const bad of ['x'.repeat(MAX_REQUEST_ID_LENGTH + 1), 'has space', 'quote"d', 'new\tline', 'semi;colon', 'ünïcode', '']) {
      const r = await proxied.get(bad ? { 'x-request-id': bad } : {});
      expect(r.id).toMatch(/^[A-Za-z0-9]{16}$/);
      expect(r.logged).toBe(r.id);
    }
  });
});
