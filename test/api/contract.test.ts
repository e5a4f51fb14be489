import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, describe, expect, it } from 'vitest';
import { recordPresenceMarks } from '../../src/domain/attendance.js';
import { hashUserId } from '../../src/domain/links.js';
import { publicPersonId } from '../../src/domain/people.js';
import { recordMeteredTime } from '../../src/metering/charge.js';
import { recordParticipantJoined } from '../../src/metering/participants.js';
import { ensureSessionStarted, finishSession } from '../../src/metering/sessions.js';
import { rect } from '../board/factories.js';
import sharp from 'sharp';
import { checkImage } from '../../src/board/files/check.js';
import { PgFileStore } from '../../src/board/files/store.js';
import { BoardService } from '../../realtime/features/board/service.js';
import { makeDeps } from '../helpers/deps.js';
import { createApiKey } from '../../src/domain/apiKeys.js';
import { partnerFactory } from '../helpers/factories.js';
import { startReceiver } from '../webhooks/helpers/receiver.js';
import { eventually } from '../helpers/wait.js';
import { startWebhookStack } from '../webhooks/helpers/stack.js';

/**
 * The OpenAPI document is the contract: real responses of every route, and real
 * webhook deliveries (recorded by the metering code and delivered by a real
 * dispatcher to a real receiver), are validated against it with ajv (JSON
 * Schema draft 2020-12, the dialect of OpenAPI 3.1) and ajv-formats. A response
 * whose status the document does not list for its route fails the test.
 */
const stack = await startWebhookStack({ env: { RATE_LIMIT_PER_MINUTE: '60' } });
await stack.dispatcher();
const sql = stack.sql;
// a gateway node's board service on the stack's database, to draw something for the preview
const boardDeps = makeDeps({ env: { DATABASE_URL: stack.databaseUrl } });
const node = { board: new BoardService(boardDeps, { previewDebounceMs: 60_000 }) };
afterAll(async () => {
  await node.board.close();
  await boardDeps.close();
});
const base = `http://127.0.0.1:${stack.api.port}`;

interface Res { status: number; headers: Headers; text: string; json: any }
async function call(method: string, path: string, o: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {}): Promise<Res> {
  const headers: Record<string, string> = { ...(o.headers ?? {}) };
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  let body = o.raw;
  if (o.body !== undefined) body = JSON.stringify(o.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(`${base}${path.startsWith('/api/') ? path : `/api/partner/v1${path}`}`, { method, headers, body });
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, text, json };
}

const doc = (await call('GET', '/api/partner/v1/openapi.json')).json;
// ajv: the most used JSON Schema validator, with draft 2020-12 (OpenAPI 3.1's dialect) and the formats
// (date, date-time, uri) as a separate, equally maintained plugin; strict off for OpenAPI's own keywords.
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);
ajv.addSchema(doc, 'openapi');
const validators = new Map<string, ValidateFunction>();
const pointer = (...segments: string[]) => segments.map((s) => encodeURIComponent(s.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');
function validatorAt(ptr: string): ValidateFunction {
  let v = validators.get(ptr);
  if (!v) validators.set(ptr, (v = ajv.compile({ $ref: `openapi#/${ptr}` })));
  return v;
}
const resolve = (obj: any) => (obj?.$ref ? obj.$ref.slice(2).split('/').reduce((o: any, k: string) => o[k], doc) : obj);

const seen = new Map<string, Set<number>>();
/** Fails unless the document lists this status for the route, with these headers and this body. */
function conform(method: string, template: string, res: Res): Res {
  const m = method.toLowerCase();
  const op = doc.paths[template]?.[m];
  if (!op) throw new Error(`${method} ${template} is not in the document`);
  const declared = op.responses[String(res.status)];
  if (!declared) throw new Error(`${method} ${template} answered ${res.status}, which the document does not list (${res.text.slice(0, 200)})`);
  for (const [name, h] of Object.entries(declared.headers ?? {})) {
    if (resolve(h).required) expect(res.headers.get(name), `${method} ${template} ${res.status}: header ${name}`).not.toBeNull();
  }
  const content = declared.content ?? {};
  const type = Object.keys(content)[0];
  if (!type) expect(res.text, `${method} ${template} ${res.status}: no body`).toBe('');
  else {
    // a range (`image/*`) is any type of it
    expect(res.headers.get('content-type') ?? '', `${method} ${template} ${res.status}`).toContain(type.endsWith('/*') ? type.slice(0, -1) : type);
    if (type === 'application/json') {
      const v = validatorAt(pointer('paths', template, m, 'responses', String(res.status), 'content', type, 'schema'));
      if (!v(res.json)) throw new Error(`${method} ${template} ${res.status}: ${ajv.errorsText(v.errors)} in ${res.text.slice(0, 300)}`);
    }
  }
  const key = `${m} ${template}`;
  seen.set(key, (seen.get(key) ?? new Set()).add(res.status));
  return res;
}
const c = async (method: string, template: string, path: string, o: Parameters<typeof call>[2] = {}) => conform(method, template, await call(method, path, o));

describe('the OpenAPI document is the contract', () => {
  it('is valid JSON Schema where it holds schemas, and lists webhooks for every event type', () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual(['balance.exhausted', 'balance.low', 'lesson.ended', 'lesson.started', 'participant.joined', 'participant.left', 'webhook.test']);
    for (const name of Object.keys(doc.components.schemas)) expect(() => validatorAt(pointer('components', 'schemas', name)), name).not.toThrow();
    // responses are open to new fields
    expect(JSON.stringify(doc.components.schemas)).not.toContain('"additionalProperties":false');
  });

  it('fails a response whose status the document does not list', () => {
    const fake = { status: 418, headers: new Headers(), text: '', json: undefined };
    expect(() => conform('GET', '/balance', fake)).toThrow(/answered 418, which the document does not list/);
    const wrongBody = { status: 200, headers: new Headers({ 'content-type': 'application/json', 'x-request-id': 'x' }), text: '{}', json: { balance_seconds: 'many' } };
    expect(() => conform('GET', '/balance', wrongBody)).toThrow(/balance_seconds|required/);
  });

  it('every route answers as documented, in success and in error', async () => {
    const p = await partnerFactory(sql);
    const k = p.apiKey;
    const boardOnly = await partnerFactory(sql, { plan: 'board_only' });
    const broke = await partnerFactory(sql, { minutes: 0 });

    // lessons
    const lesson = (await c('POST', '/lessons', '/lessons', { key: k, body: { title: 'Contract', external_id: 'c-1' } })).json;
    const idem = { 'idempotency-key': 'contract-1' };
    await c('POST', '/lessons', '/lessons', { key: k, body: { title: 'Once', external_id: null }, headers: idem });
    const replay = await c('POST', '/lessons', '/lessons', { key: k, body: { title: 'Once', external_id: null }, headers: idem });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    await c('POST', '/lessons', '/lessons', { key: k, body: { title: 'Other' }, headers: idem }); // 409 idempotency_key_reused
    await c('POST', '/lessons', '/lessons', { key: k, body: { title: 'Dup', external_id: 'c-1' } }); // 409 conflict
    await c('POST', '/lessons', '/lessons', { key: k, body: { title: '' } }); // 422
    await c('POST', '/lessons', '/lessons', { key: k, raw: '{"title":' }); // 400
    await c('POST', '/lessons', '/lessons', { key: k, raw: 'title=x', headers: { 'content-type': 'text/plain' } }); // 415
    await c('POST', '/lessons', '/lessons', { key: k, raw: JSON.stringify({ title: 'x'.repeat(70_000) }) }); // 413
    await c('POST', '/lessons', '/lessons', { body: { title: 'x' } }); // 401
    await c('POST', '/lessons', '/lessons', { key: boardOnly.apiKey, body: { title: 'x', mode: 'full' } }); // 403
    const list = await c('GET', '/lessons', '/lessons?limit=1', { key: k });
    expect(list.headers.get('link')).toContain('rel="next"');
    await c('GET', '/lessons', '/lessons?external_id=c-1', { key: k });
    await c('GET', '/lessons', `/lessons?after=lsn_unknown`, { key: k }); // 400
    await c('GET', '/lessons', '/lessons?limit=0', { key: k }); // 422
    const got = await c('GET', '/lessons/{id}', `/lessons/${lesson.id}`, { key: k });
    await c('GET', '/lessons/{id}', `/lessons/${lesson.id}`, { key: k, headers: { 'if-none-match': got.headers.get('etag')! } }); // 304
    await c('GET', '/lessons/{id}', `/lessons/${'x'.repeat(65)}`, { key: k }); // 404
    await c('PATCH', '/lessons/{id}', `/lessons/${lesson.id}`, { key: k, body: { title: 'Contract 2', subject_mode: 'math' } });
    await c('PATCH', '/lessons/{id}', `/lessons/${lesson.id}`, { key: k, body: {} }); // 422
    await c('GET', '/lessons', '/lessons?status=never_started&created[gte]=2020-01-01T00:00:00Z', { key: k });

    // links, board content
    const issued = (await c('POST', '/lessons/{id}/links', `/lessons/${lesson.id}/links`, { key: k, body: { user: { id: 'u1', name: 'Ann', role: 'teacher' } } })).json;
    await c('GET', '/lessons/{id}/links', `/lessons/${lesson.id}/links`, { key: k });
    await c('GET', '/lessons/{id}/attendance', `/lessons/${lesson.id}/attendance`, { key: k });
    await c('GET', '/lessons/{id}/attendance', `/lessons/${lesson.id}/attendance?session_id=x`, { key: k }); // 422
    await c('GET', '/lessons/{id}/attendance', `/lessons/${lesson.id}/attendance?session_id=1`, { key: k }); // 404
    await c('POST', '/lessons/{id}/participants/{person}/remove', `/lessons/${lesson.id}/participants/${issued.person}/remove`, { key: k });
    await c('POST', '/lessons/{id}/participants/{person}/remove', `/lessons/${lesson.id}/participants/psn_nobody/remove`, { key: k }); // 404
    await c('DELETE', '/lessons/{id}/links/{link_id}', `/lessons/${lesson.id}/links/${issued.id}`, { key: k });
    await c('DELETE', '/lessons/{id}/links/{link_id}', `/lessons/${lesson.id}/links/lnk_unknown`, { key: k }); // 404
    await c('POST', '/lessons/{id}/links', `/lessons/${lesson.id}/links`, { key: k, body: { user: { id: 'u1', name: 'Ann', role: 'admin' } } }); // 422
    const theirs = (await call('POST', '/lessons', { key: broke.apiKey, body: { title: 'No minutes' } })).json;
    await c('POST', '/lessons/{id}/links', `/lessons/${theirs.id}/links`, { key: broke.apiKey, body: { user: { id: 'u', name: 'n', role: 'student' } } }); // 402
    await c('POST', '/lessons/{id}/links', `/lessons/${theirs.id}/links`, { key: k, body: { user: { id: 'u', name: 'n', role: 'student' } } }); // 404
    const snap = await c('GET', '/lessons/{id}/snapshot', `/lessons/${lesson.id}/snapshot`, { key: k });
    await c('GET', '/lessons/{id}/snapshot', `/lessons/${lesson.id}/snapshot`, { key: k, headers: { 'if-none-match': snap.headers.get('etag')! } }); // 304
    await c('GET', '/lessons/{id}/preview', `/lessons/${lesson.id}/preview`, { key: k }); // 404 no_preview
    await c('GET', '/lessons/{id}/export.pdf', `/lessons/${lesson.id}/export.pdf`, { key: k }); // 404 board_empty
    await node.board.submit(lesson.id, { type: 'element.add', elements: [rect('r')] }, { role: 'student' });
    const png = await c('GET', '/lessons/{id}/preview', `/lessons/${lesson.id}/preview`, { key: k });
    await c('GET', '/lessons/{id}/preview', `/lessons/${lesson.id}/preview`, { key: k, headers: { 'if-none-match': png.headers.get('etag')! } }); // 304
    const pdf = await c('GET', '/lessons/{id}/export.pdf', `/lessons/${lesson.id}/export.pdf`, { key: k });
    await c('GET', '/lessons/{id}/export.pdf', `/lessons/${lesson.id}/export.pdf`, { key: k, headers: { 'if-none-match': pdf.headers.get('etag')! } }); // 304
    const stored = await checkImage(await sharp({ create: { width: 4, height: 4, channels: 3, background: '#f00' } }).png().toBuffer(), { maxPixels: 100 });
    await new PgFileStore(sql).put(lesson.id, stored, 'p1', { maxBytes: 1e6, maxFiles: 10 });
    const file = await c('GET', '/lessons/{id}/files/{file_id}', `/lessons/${lesson.id}/files/${stored.id}`, { key: k });
    await c('GET', '/lessons/{id}/files/{file_id}', `/lessons/${lesson.id}/files/${stored.id}`, { key: k, headers: { 'if-none-match': file.headers.get('etag')! } }); // 304
    await c('GET', '/lessons/{id}/files/{file_id}', `/lessons/${lesson.id}/files/${'0'.repeat(64)}`, { key: k }); // 404

    // the rest on a second key of the same partner: one key's 60 requests a minute would not cover every route
    const k2 = (await createApiKey(sql, p.partner.id)).apiKey;
    // balance and reports
    await c('GET', '/balance', '/balance', { key: k2 });
    await c('GET', '/usage', '/usage', { key: k2 });
    await c('GET', '/usage', '/usage?from=2026-02-30', { key: k2 }); // 400
    await c('GET', '/usage', '/usage?from=2026-01-01&from=2026-01-02', { key: k2 }); // 400
    await c('GET', '/calls', '/calls', { key: k2 });
    await c('GET', '/calls', '/calls?limit=0', { key: k2 }); // 422
    await c('GET', '/calls', '/calls?to=2026-01-01&to=2026-01-02', { key: k2 }); // 400

    // webhook and events
    await c('GET', '/webhook', '/webhook', { key: k2 }); // 404
    await c('POST', '/webhook/test', '/webhook/test', { key: k2 }); // 400 no_webhook
    await c('PUT', '/webhook', '/webhook', { key: k2, body: { url: 'http://example.com/' } }); // 400 bad_url
    await c('PUT', '/webhook', '/webhook', { key: k2, body: {} }); // 422
    await c('PUT', '/webhook', '/webhook', { key: k2, body: { url: 'https://hook.test:1/in' } });
    await c('PUT', '/webhook', '/webhook', { key: k2, body: { url: 'https://hook.test:1/in', rotate: true } });
    await c('GET', '/webhook', '/webhook', { key: k2 });
    const test = await c('POST', '/webhook/test', '/webhook/test', { key: k2 });
    await c('GET', '/events', '/events?limit=1', { key: k2 });
    await c('GET', '/events', '/events?limit=0', { key: k2 }); // 422
    await c('POST', '/events/{id}/redeliver', `/events/${test.json.id}/redeliver`, { key: k2 });
    await c('POST', '/events/{id}/redeliver', '/events/abc/redeliver', { key: k2 }); // 404
    await eventually(async () => (await call('GET', '/webhook/deliveries', { key: k2 })).json.length > 0);
    await c('GET', '/webhook/deliveries', '/webhook/deliveries', { key: k2 });
    await c('GET', '/webhook/deliveries', '/webhook/deliveries?limit=5000', { key: k2 }); // 422
    await c('DELETE', '/webhook', '/webhook', { key: k2 });

    // board history and replay links
    await c('GET', '/lessons/{id}/history', `/lessons/${lesson.id}/history?limit=1`, { key: k2 });
    await c('GET', '/lessons/{id}/history', `/lessons/${lesson.id}/history?limit=0`, { key: k2 }); // 422
    await c('POST', '/lessons/{id}/replay-links', `/lessons/${lesson.id}/replay-links`, { key: k2, body: { ttl_minutes: 60 } });
    await c('POST', '/lessons/{id}/replay-links', `/lessons/${theirs.id}/replay-links`, { key: k2, body: {} }); // 404

    // archive
    await c('DELETE', '/lessons/{id}', `/lessons/${lesson.id}`, { key: k2 });
    for (const [method, template, suffix] of [['GET', '/lessons/{id}', ''], ['DELETE', '/lessons/{id}', ''], ['GET', '/lessons/{id}/snapshot', '/snapshot'], ['GET', '/lessons/{id}/preview', '/preview'], ['GET', '/lessons/{id}/files/{file_id}', `/files/${stored.id}`], ['GET', '/lessons/{id}/history', '/history']] as const) {
      await c(method, template, `/lessons/${lesson.id}${suffix}`, { key: k2 }); // 410
    }
    await c('POST', '/lessons/{id}/links', `/lessons/${lesson.id}/links`, { key: k2, body: { user: { id: 'u', name: 'n', role: 'student' } } }); // 410
    await c('POST', '/lessons/{id}/replay-links', `/lessons/${lesson.id}/replay-links`, { key: k2, body: {} }); // 410

    // 429: a key past its 60 requests a minute
    const busy = await partnerFactory(sql);
    const statuses = new Set<number>();
    for (let i = 0; i < 61; i++) statuses.add((await c('GET', '/balance', '/balance', { key: busy.apiKey })).status);
    expect([...statuses].sort()).toEqual([200, 429]);

    // every status each route declares for its own cases was seen (the global 500/503 and a few others aside)
    const missing: string[] = [];
    for (const [template, ops] of Object.entries<any>(doc.paths)) {
      for (const [m, op] of Object.entries<any>(ops)) {
        const got = seen.get(`${m} ${template}`) ?? new Set();
        if (got.size === 0) missing.push(`${m} ${template}: never called`);
        for (const s of Object.keys(op.responses).map(Number)) {
          if (s >= 200 && s < 300 && !got.has(s)) missing.push(`${m} ${template} ${s}`);
        }
      }
    }
    expect(missing).toEqual([]);
  }, 60_000);

  it('real webhook deliveries of every event type match the document (body and headers)', async () => {
    const receiver = await startReceiver();
    const p = await partnerFactory(sql, { minutes: 61 });
    const every = Object.keys(doc.webhooks);
    expect((await call('PUT', '/webhook', { key: p.apiKey, body: { url: receiver.url, enabled_events: every } })).status).toBe(200);
    const lesson = (await call('POST', '/lessons', { key: p.apiKey, body: { title: 'Events', external_id: 'ev-1' } })).json;
    const link = (await call('POST', `/lessons/${lesson.id}/links`, { key: p.apiKey, body: { user: { id: 'u1', name: 'Ann', role: 'teacher' } } })).json;
    const personId = publicPersonId(lesson.id, hashUserId(p.partner, 'u1'));
    // in the past: a delivery is due at its event's time
    const t0 = new Date(Date.now() - 2 * 3600_000);
    const at = (s: number) => new Date(t0.getTime() + s * 1000);
    // the metering code records them, as the gateway makes it do
    const { session } = await ensureSessionStarted(sql, { lessonId: lesson.id, at: at(0), people: 2 });
    await recordParticipantJoined(sql, { lessonId: lesson.id, partnerId: p.partner.id, externalId: 'ev-1', userHash: hashUserId(p.partner, 'u1'), role: 'teacher', name: 'Ann', linkId: link.id, at: at(1) });
    await recordPresenceMarks(sql, [
      { lessonId: lesson.id, personId, joined: true, linkId: link.id, at: at(1) },
      { lessonId: lesson.id, personId, joined: false, linkId: null, at: at(90) },
    ]);
    await recordMeteredTime(sql, { sessionId: session.id, cumulativeSeconds: 120, at: at(120) }); // below one hour: balance.low
    await finishSession(sql, { sessionId: session.id, cumulativeSeconds: 3700, chargeAt: at(3700), endedAt: at(3700), at: at(4000) }); // balance.exhausted, lesson.ended
    await call('POST', '/webhook/test', { key: p.apiKey });

    const received = await receiver.waitFor(7, 20_000);
    const types = received.map((r) => r.body.type).sort();
    expect(types).toEqual(every.sort());
    for (const req of received) {
      const type = req.body.type;
      const v = validatorAt(pointer('webhooks', type, 'post', 'requestBody', 'content', 'application/json', 'schema'));
      if (!v(JSON.parse(req.rawBody.toString()))) throw new Error(`${type}: ${ajv.errorsText(v.errors)} in ${req.rawBody}`);
      for (const param of doc.webhooks[type].post.parameters) {
        const value = req.headers[param.name.toLowerCase()];
        expect(value, `${type} ${param.name}`).toBeDefined();
        const hv = ajv.compile(param.schema);
        expect(hv(value), `${type} ${param.name}: ${value}`).toBe(true);
      }
    }
    await receiver.close();
  }, 60_000);
});
