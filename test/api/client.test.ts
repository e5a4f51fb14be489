import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { generateSchema, SCHEMA_FILE } from '../../clients/ts/generate.js';
import { LiveWebhookError, runExample } from '../../clients/ts/examples/integration.js';
import { createLessonClient, parseWebhook } from '../../clients/ts/src/index.js';
import { signatureHeader } from '../../src/webhooks/signing.js';
import { partnerFactory } from '../helpers/factories.js';
import { freePort } from '../helpers/net.js';
import { startWebhookStack } from '../webhooks/helpers/stack.js';

const run = promisify(execFile);
const stack = await startWebhookStack();
await stack.dispatcher();
const baseUrl = `http://127.0.0.1:${stack.api.port}/api/partner/v1`;

describe('the typed client (clients/ts)', () => {
  it('has types generated from the current OpenAPI document (npm run client:generate)', async () => {
    expect(readFileSync(SCHEMA_FILE, 'utf8') === (await generateSchema()), 'clients/ts/src/schema.ts is stale: run npm run client:generate').toBe(true);
  });

  it('runs the example integration against the service: lesson, two links, a verified webhook', async () => {
    const p = await partnerFactory(stack.sql);
    const port = await freePort();
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'clients/ts/examples/integration.ts'], {
      env: { ...process.env, LESSONS_BASE_URL: baseUrl, LESSONS_API_KEY: p.apiKey, WEBHOOK_PUBLIC_URL: `http://127.0.0.1:${port}/webhooks`, WEBHOOK_PORT: String(port) },
      timeout: 30_000,
    });
    const lines = Object.fromEntries(stdout.trim().split('\n').map((l) => [l.split(' ')[0], l.slice(l.indexOf(' ') + 1)]));
    expect(lines.lesson).toMatch(/^lsn_/);
    expect(lines.teacher).toMatch(/\/embed\/[A-Za-z0-9_-]{43}$/);
    expect(lines.student).toMatch(/\/embed\/[A-Za-z0-9_-]{43}$/);
    expect(lines.webhook).toMatch(/^webhook\.test #\d+ verified$/);
    // what the example did is what the service holds
    const api = createLessonClient({ baseUrl, apiKey: p.apiKey });
    const { data: lesson } = await api.GET('/lessons/{id}', { params: { path: { id: lines.lesson } } });
    expect(lesson).toMatchObject({ id: lines.lesson, mode: 'full', subject_mode: 'math', archived: false });
    const [{ n }] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM links WHERE lesson_id = ${lines.lesson}`;
    expect(n).toBe(2);
  }, 60_000);

  it('answers errors typed as the document says, and parseWebhook refuses a bad signature or body', async () => {
    const p = await partnerFactory(stack.sql);
    const api = createLessonClient({ baseUrl, apiKey: p.apiKey });
    const missing = await api.GET('/lessons/{id}', { params: { path: { id: 'lsn_nope' } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.detail.code).toBe('not_found');
    const t = Math.floor(Date.now() / 1000);
    const body = '{"id":1,"type":"webhook.test","created_at":"2026-01-01T00:00:00.000Z","data":{"message":"hi"}}';
    expect(parseWebhook(body, signatureHeader('whsec_a', t, body), 'whsec_a')).toMatchObject({ ok: true, event: { id: 1, type: 'webhook.test' } });
    expect(parseWebhook(body, signatureHeader('whsec_b', t, body), 'whsec_a')).toEqual({ ok: false, reason: 'no_matching_signature' });
    expect(parseWebhook('not json', signatureHeader('whsec_a', t, 'not json'), 'whsec_a')).toEqual({ ok: false, reason: 'malformed_body' });
  });

  it('the example leaves a webhook set to another address alone unless told to replace it, and waits a bounded time for its event', async () => {
    const p = await partnerFactory(stack.sql);
    const api = createLessonClient({ baseUrl, apiKey: p.apiKey });
    const live = `http://127.0.0.1:${await freePort()}/live`;
    expect((await api.PUT('/webhook', { body: { url: live } })).response.status).toBe(200);
    const port = await freePort();
    const mine = `http://127.0.0.1:${port}/webhooks`;
    await expect(runExample({ baseUrl, apiKey: p.apiKey, webhookUrl: mine, port })).rejects.toBeInstanceOf(LiveWebhookError);
    expect((await api.GET('/webhook')).data?.url).toBe(live);
    // told to, it replaces it; the service delivers where nothing listens, so no event comes: it gives up after waitMs
    const nobody = `http://127.0.0.1:${await freePort()}/webhooks`;
    const t0 = Date.now();
    await expect(runExample({ baseUrl, apiKey: p.apiKey, webhookUrl: nobody, port, replaceWebhook: true, waitMs: 1000 })).rejects.toThrow(/within 1 s/);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect((await api.GET('/webhook')).data?.url).toBe(nobody);
  }, 60_000);

  it('the example rotates the secret of a webhook already set to its own address, so the previous secret keeps signing', async () => {
    const p = await partnerFactory(stack.sql);
    const api = createLessonClient({ baseUrl, apiKey: p.apiKey });
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/webhooks`;
    expect((await api.PUT('/webhook', { body: { url } })).data?.secret).toMatch(/^whsec_/);
    const result = await runExample({ baseUrl, apiKey: p.apiKey, webhookUrl: url, port });
    result.server.close();
    expect(result.event.type).toBe('webhook.test');
    expect((await api.GET('/webhook')).data).toMatchObject({ url, rotation: { previous_secret_expires_at: expect.any(String) } });
  }, 60_000);
});
