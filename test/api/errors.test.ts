import { beforeAll, describe, expect, it } from 'vitest';
import { apiError, startTestApi, validationError } from '../helpers/api.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';

const api = await startTestApi();
let p: PartnerFixture;
beforeAll(async () => {
  p = await partnerFactory(api.deps.sql);
});

describe('errors are JSON in the spec format, never a stack trace or an HTML page', () => {
  it('malformed JSON answers 400 bad_request and creates nothing', async () => {
    const res = await api.request('POST', '/lessons', { key: p.apiKey, raw: '{"title": "x",', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual(apiError('bad_request'));
  });

  it('a body that is not JSON answers 415 unsupported_media_type', async () => {
    const res = await api.request('POST', '/lessons', { key: p.apiKey, raw: 'title=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(res.status).toBe(415);
    expect(res.body).toEqual(apiError('unsupported_media_type'));
  });

  it('a body over 64 KiB answers 413 payload_too_large', async () => {
    const res = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'x'.repeat(70_000) } });
    expect(res.status).toBe(413);
    expect(res.body).toEqual(apiError('payload_too_large'));
  });

  it('a body over 64 KiB sent in chunks (no Content-Length) answers 413 payload_too_large as well, and creates nothing', async () => {
    const body = JSON.stringify({ title: 'x'.repeat(70_000), external_id: 'chunked-413' });
    const chunks = [body.slice(0, 30_000), body.slice(30_000)];
    const res = await fetch(`${api.base}/api/partner/v1/lessons`, {
      method: 'POST',
      headers: { authorization: `Bearer ${p.apiKey}`, 'content-type': 'application/json' },
      body: new ReadableStream({
        pull(c) {
          const next = chunks.shift();
          if (next === undefined) c.close();
          else c.enqueue(new TextEncoder().encode(next));
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(apiError('payload_too_large'));
    expect((await api.request('GET', '/lessons?external_id=chunked-413', { key: p.apiKey })).body).toEqual([]);
  });

  it('a JSON body that is not an object answers 422 at loc ["body"]', async () => {
    const res = await api.request('POST', '/lessons', { key: p.apiKey, body: ['title'] });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].loc).toEqual(['body']);
  });

  it('a NUL character (U+0000) in any field answers 422 naming the field, and creates nothing (Postgres cannot store it)', async () => {
    const lesson = (await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'nul' } })).body.id;
    const nul = (loc: (string | number)[]) => validationError([{ loc, msg: expect.any(String), type: 'nul_character' }]);
    const cases = [
      ['POST', '/lessons', { title: 'a\u0000b', external_id: 'nul-1' }, ['body', 'title']],
      ['GET', '/lessons?external_id=%00', undefined, ['query', 'external_id']],
      ['POST', `/lessons/${lesson}/links`, { user: { id: 'u\u0000', name: 'n', role: 'student' } }, ['body', 'user', 'id']],
    ] as const;
    for (const [method, path, body, loc] of cases) {
      const res = await api.request(method, path, { key: p.apiKey, body });
      expect(res.status, `${method} ${path}`).toBe(422);
      expect(res.body, `${method} ${path}`).toEqual(nul([...loc]));
    }
    expect((await api.request('GET', '/lessons?external_id=nul-1', { key: p.apiKey })).body).toEqual([]);
    // in the path it names no lesson: 404, like an unknown id
    const inPath = await api.request('GET', '/lessons/lsn_%00', { key: p.apiKey });
    expect([inPath.status, inPath.body]).toEqual([404, apiError('not_found', 'Lesson not found')]);
  });

  it('an unknown route answers 404 not_found in JSON', async () => {
    const res = await api.request('GET', '/nope', { key: p.apiKey });
    expect(res.status).toBe(404);
    expect(res.body).toEqual(apiError('not_found'));
    const outside = await api.request('GET', '/index.html');
    expect(outside.status).toBe(404);
    expect(outside.headers.get('content-type')).toMatch(/application\/json/);
  });

  it('a known path with an unsupported method answers 405 method_not_allowed with Allow', async () => {
    const res = await api.request('PATCH', '/lessons', { key: p.apiKey, body: {} });
    expect(res.status).toBe(405);
    expect(res.body).toEqual(apiError('method_not_allowed'));
    expect(res.headers.get('allow')).toContain('POST');
  });

  it('every response carries a request id', async () => {
    const res = await api.request('GET', '/balance', { key: p.apiKey });
    expect(res.headers.get('x-request-id')).toMatch(/^\w+$/);
  });

  it('every error body carries the request id of its X-Request-Id header, whatever answered it', async () => {
    const cases = [
      await api.request('GET', '/balance'), // 401, before the route
      await api.request('GET', '/lessons/lsn_nope', { key: p.apiKey }), // 404 from the route
      await api.request('GET', '/nope', { key: p.apiKey }), // 404, no route
      await api.request('DELETE', '/balance', { key: p.apiKey }), // 405
      await api.request('POST', '/lessons', { key: p.apiKey, body: { title: '' } }), // 422
      await api.request('POST', '/lessons', { key: p.apiKey, raw: '{', headers: { 'content-type': 'application/json' } }), // 400 from the body reader
    ];
    expect(cases.map((r) => r.status)).toEqual([401, 404, 404, 405, 422, 400]);
    for (const r of cases) expect(r.body.request_id, `${r.status}`).toBe(r.headers.get('x-request-id'));
    expect(new Set(cases.map((r) => r.body.request_id)).size).toBe(cases.length);
  });

  it("a replayed error (same Idempotency-Key) answers with the replaying request's id, like its header", async () => {
    await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'taken', external_id: 'request-id-replay' } });
    const again = () =>
      api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'again', external_id: 'request-id-replay' }, headers: { 'idempotency-key': 'request-id-replay' } });
    const first = await again();
    const replayed = await again();
    expect([first.status, replayed.status, replayed.headers.get('idempotent-replayed')]).toEqual([409, 409, 'true']);
    expect(replayed.body).toEqual(apiError('conflict', first.body.detail.message));
    expect(replayed.body.request_id).toBe(replayed.headers.get('x-request-id'));
    expect(replayed.body.request_id).not.toBe(first.body.request_id);
  });
});
