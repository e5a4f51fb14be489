import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { startApi } from '../../src/server.js';
import { createLogger } from '../../src/logger.js';
import { makeDeps } from '../helpers/deps.js';
import { partnerFactory } from '../helpers/factories.js';

describe('logs', () => {
  it('never contain API keys, link tokens or partners’ user ids, even at trace level and on errors', async () => {
    let captured = '';
    const sink = new Writable({ write(chunk, _enc, cb) { captured += chunk; cb(); } });
    const base = makeDeps();
    const deps = { ...base, log: createLogger('trace', sink) };
    const api = await startApi(deps, 0);
    afterAll(async () => { await api.close(); await base.close(); });
    const url = `http://127.0.0.1:${api.port}/api/partner/v1`;
    const p = await partnerFactory(deps.sql);
    const headers = { authorization: `Bearer ${p.apiKey}`, 'content-type': 'application/json' };
    const lesson = await (await fetch(`${url}/lessons`, { method: 'POST', headers, body: JSON.stringify({ title: 't' }) })).json();
    const secretUser = 'user-id-that-must-not-leak-8842';
    const link = await (await fetch(`${url}/lessons/${lesson.id}/links`, { method: 'POST', headers, body: JSON.stringify({ user: { id: secretUser, name: 'N', role: 'student' } }) })).json();
    await fetch(`${url}/lessons/${lesson.id}/links`, { method: 'POST', headers, body: JSON.stringify({ user: { id: secretUser, name: '', role: 'x' } }) });
    await fetch(`${url}/balance`, { headers: { authorization: 'Bearer wbk_notarealkeybutlookssecret000000' } });
    await fetch(`${url}/balance?token=${link.token}`, { headers });
    await new Promise((r) => setTimeout(r, 50));
    expect(captured).toContain('"request"');
    expect(captured).toContain('/lessons/:id/links');
    for (const secret of [p.apiKey, secretUser, link.token, 'wbk_notarealkeybutlookssecret000000']) expect(captured).not.toContain(secret);
  });
});
