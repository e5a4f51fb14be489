import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { request as rawRequest } from 'undici';
import { beforeAll, describe, expect, it } from 'vitest';
import { ifNoneMatchMatches } from '../../src/api/conditional.js';
import { recordMeteredTime } from '../../src/metering/charge.js';
import { ensureSessionStarted } from '../../src/metering/sessions.js';
import { startTestApi } from '../helpers/api.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { rect } from '../board/factories.js';
import { startNode } from '../board/helpers.js';

const api = await startTestApi();
const node = startNode();
const student = { role: 'student' as const };
let p: PartnerFixture;
beforeAll(async () => {
  p = await partnerFactory(api.deps.sql);
});

const get = (path: string, headers: Record<string, string> = {}) => api.request('GET', path, { key: p.apiKey, headers });
const newLesson = async (title = 'Cached') => (await api.request('POST', '/lessons', { key: p.apiKey, body: { title } })).body.id as string;

describe('If-None-Match (RFC 9110 13.1.2)', () => {
  it('matches `*`, any tag of a list, and compares weakly', () => {
    expect(ifNoneMatchMatches('*', '"5"')).toBe(true);
    expect(ifNoneMatchMatches('"5"', '"5"')).toBe(true);
    expect(ifNoneMatchMatches('W/"5"', '"5"')).toBe(true);
    expect(ifNoneMatchMatches('"5"', 'W/"5"')).toBe(true);
    expect(ifNoneMatchMatches('"1", W/"2" ,"5"', 'W/"5"')).toBe(true);
    expect(ifNoneMatchMatches('"1", "2"', '"5"')).toBe(false);
    expect(ifNoneMatchMatches('5', '"5"')).toBe(false); // not a quoted tag
    expect(ifNoneMatchMatches('"50"', '"5"')).toBe(false);
    expect(ifNoneMatchMatches('', '"5"')).toBe(false);
  });
});

describe('ETag on GET /lessons/{id}', () => {
  it('answers 304 with the same ETag while the lesson is unchanged, 200 with a new ETag once it changes', async () => {
    const id = await newLesson();
    const first = await get(`/lessons/${id}`);
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^W\/"[A-Za-z0-9_-]{22}"$/);
    for (const inm of [etag, etag.slice(2), `"nope", ${etag}`, '*']) {
      const res = await get(`/lessons/${id}`, { 'if-none-match': inm });
      expect([inm, res.status, res.text, res.headers.get('etag')]).toEqual([inm, 304, '', etag]);
    }
    expect((await get(`/lessons/${id}`, { 'if-none-match': '"nope"' })).status).toBe(200);
    const { session } = await ensureSessionStarted(api.deps.sql, { lessonId: id, at: new Date(), people: 2 });
    await recordMeteredTime(api.deps.sql, { sessionId: session.id, cumulativeSeconds: 60, at: new Date(Date.now() + 60_000) });
    const changed = await get(`/lessons/${id}`, { 'if-none-match': etag });
    expect(changed.status).toBe(200);
    expect(changed.body.billed_seconds).toBe(60);
    expect(changed.headers.get('etag')).not.toBe(etag);
  });
});

describe('ETag and If-None-Match on the snapshot and the preview', () => {
  it('tags the snapshot with its format version and seq (weak), answers 304 to a match, and 200 after a new operation', async () => {
    const id = await newLesson();
    const empty = await get(`/lessons/${id}/snapshot`);
    expect([empty.status, empty.headers.get('etag'), empty.headers.get('cache-control')]).toEqual([200, 'W/"1-0"', 'private, no-cache']);
    for (const inm of ['W/"1-0"', '"1-0"', '"x", W/"1-0"', '*']) {
      const res = await get(`/lessons/${id}/snapshot`, { 'if-none-match': inm });
      expect([inm, res.status, res.text]).toEqual([inm, 304, '']);
    }
    await node.board.submit(id, { type: 'element.add', elements: [rect('a')] }, student);
    const after = await get(`/lessons/${id}/snapshot`, { 'if-none-match': 'W/"1-0"' });
    expect([after.status, after.headers.get('etag'), after.body.seq]).toEqual([200, 'W/"1-1"', 1]);
  });

  it('evaluates the preview\'s If-None-Match by RFC 9110: weak tags, lists and `*` match', async () => {
    const id = await newLesson();
    await node.board.submit(id, { type: 'element.add', elements: [rect('a')] }, student);
    const first = await get(`/lessons/${id}/preview`);
    expect([first.status, first.headers.get('etag')]).toEqual([200, '"1"']);
    for (const inm of ['"1"', 'W/"1"', '"0", "1"', '*']) {
      expect((await get(`/lessons/${id}/preview`, { 'if-none-match': inm })).status, inm).toBe(304);
    }
    expect((await get(`/lessons/${id}/preview`, { 'if-none-match': '"0", "2"' })).status).toBe(200);
  });
});

describe('compression (koa-compress)', () => {
  it('sends JSON of 1 KiB or more as br or gzip, as the client accepts, and small or unaccepted bodies as they are', async () => {
    const q = await partnerFactory(api.deps.sql);
    for (let i = 0; i < 10; i++) await api.request('POST', '/lessons', { key: q.apiKey, body: { title: `Lesson number ${i}` } });
    const listPath = '/lessons?limit=10';
    const plain = await rawRequestAs(q.apiKey, listPath);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.bytes.length).toBeGreaterThan(1024);
    const body = JSON.parse(plain.bytes.toString());

    const br = await rawRequestAs(q.apiKey, listPath, 'gzip, br');
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers.vary).toMatch(/accept-encoding/i);
    expect(JSON.parse(brotliDecompressSync(br.bytes).toString())).toEqual(body);
    expect(br.bytes.length).toBeLessThan(plain.bytes.length / 2);

    const gz = await rawRequestAs(q.apiKey, listPath, 'gzip');
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(gunzipSync(gz.bytes).toString())).toEqual(body);

    // the streamed usage report (length unknown) is compressed too
    const usage = await rawRequestAs(q.apiKey, '/usage', 'gzip');
    expect(usage.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(gunzipSync(usage.bytes).toString())).toMatchObject({ items: [], total_seconds: 0 });

    // below the threshold: as is
    const small = await rawRequestAs(q.apiKey, '/balance', 'gzip, br');
    expect(small.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(small.bytes.toString())).toMatchObject({ plan: 'full' });
  });

  async function rawRequestAs(key: string, path: string, acceptEncoding?: string) {
    const res = await rawRequest(`${api.base}/api/partner/v1${path}`, {
      headers: { authorization: `Bearer ${key}`, ...(acceptEncoding ? { 'accept-encoding': acceptEncoding } : {}) },
    });
    return { status: res.statusCode, headers: res.headers, bytes: Buffer.from(await res.body.arrayBuffer()) };
  }
});
