import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { startApi } from '../../src/server.js';
import { makeDeps } from '../helpers/deps.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { apiError, validationError } from '../helpers/api.js';

/** A client that hangs up mid-body, and strings that are not Unicode. */
let captured = '';
const sink = new Writable({
  write(chunk, _enc, cb) {
    captured += chunk;
    cb();
  },
});
const base = makeDeps();
const deps = { ...base, log: createLogger('info', sink) };
const api = await startApi(deps, 0);
afterAll(async () => {
  await api.close();
  await base.close();
});
const url = `http://127.0.0.1:${api.port}/api/partner/v1`;
let p: PartnerFixture;
beforeAll(async () => {
  p = await partnerFactory(deps.sql);
});

const lessonCount = async () => (await deps.sql`SELECT count(*)::int AS n FROM lessons WHERE partner_id = ${p.partner.id}`)[0].n as number;

async function post(body: string | Buffer) {
  const res = await fetch(`${url}/lessons`, { method: 'POST', headers: { authorization: `Bearer ${p.apiKey}`, 'content-type': 'application/json' }, body });
  return { status: res.status, body: (await res.json()) as any };
}

describe('a client that aborts mid-body', () => {
  it('is logged at info without a stack, as 499 in the access log, and creates nothing', async () => {
    const before = await lessonCount();
    const from = captured.length;
    // Koa prints errors nobody listens for on stderr, stack and all
    let stderr = '';
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      stderr += String(chunk);
      return write(chunk, ...rest);
    }) as typeof process.stderr.write;
    const consoleError = console.error;
    console.error = (...args: unknown[]) => {
      stderr += args.map(String).join(' ');
      consoleError(...args);
    };
    const socket = connect(api.port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write(
      `POST /api/partner/v1/lessons HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${p.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"title":"half`,
    );
    // the server authenticates and starts reading the body; then the client goes away
    await new Promise((r) => setTimeout(r, 150));
    socket.destroy();
    const deadline = Date.now() + 3000;
    while (!captured.slice(from).includes('"request"') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 50));
    process.stderr.write = write;
    console.error = consoleError;
    expect(stderr).toBe('');
    const mine = captured.slice(from).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>);
    const access = mine.find((l) => l.msg === 'request');
    expect(access).toMatchObject({ level: 30, method: 'POST', route: '/api/partner/v1/lessons', status: 499 });
    const note = mine.find((l) => l.msg === 'client closed the request before its body arrived');
    expect(note).toMatchObject({ level: 30, method: 'POST' });
    expect(mine.filter((l) => l.level >= 40)).toEqual([]);
    expect(captured.slice(from)).not.toContain('"stack"');
    expect(captured.slice(from)).not.toContain(p.apiKey);
    expect(await lessonCount()).toBe(before);
  });
});

describe('lone surrogates in JSON strings', () => {
  it('answer 422 lone_surrogate at the field, and store nothing (they used to become U+FFFD)', async () => {
    const before = await lessonCount();
    for (const [raw, loc] of [
      ['{"title":"a\\ud800b"}', ['body', 'title']],
      ['{"title":"end\\udfff"}', ['body', 'title']],
      ['{"title":"swapped \\udc00\\ud800"}', ['body', 'title']],
      ['{"title":"ok","\\ud83d":1}', ['body', '\ud83d']],
    ] as const) {
      const r = await post(raw);
      expect(r.status, raw).toBe(422);
      expect(r.body, raw).toEqual(validationError([{ loc, msg: expect.any(String), type: 'lone_surrogate' }]));
    }
    expect(await lessonCount()).toBe(before);
  });

  it('accept a surrogate pair (a character outside the BMP), escaped or not', async () => {
    for (const raw of ['{"title":"smile \\ud83d\\ude00"}', '{"title":"smile \u{1F600}"}']) {
      const r = await post(raw);
      expect(r.status, raw).toBe(201);
      expect(r.body.title).toBe('smile \u{1F600}');
    }
  });

  it('bytes that are not UTF-8 answer 400 bad_request instead of being replaced', async () => {
    const before = await lessonCount();
    const r = await post(Buffer.concat([Buffer.from('{"title":"a'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]));
    expect(r).toEqual({ status: 400, body: apiError('bad_request', 'Request body is not valid UTF-8') });
    expect(await lessonCount()).toBe(before);
  });
});

