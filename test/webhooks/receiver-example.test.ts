import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { signatureHeader } from '../../src/webhooks/signing.js';
import { freePort } from '../helpers/net.js';
import { eventually } from '../helpers/wait.js';
import { attemptsOf, startWebhookStack } from './helpers/stack.js';

/** The receiver example of docs/webhooks.md, exactly as printed there. */
const readme = readFileSync(path.join(import.meta.dirname, '../../docs/webhooks.md'), 'utf8');
const block = /<!-- receiver-example:start -->\s*```js\n([\s\S]*?)```\s*<!-- receiver-example:end -->/.exec(readme);
let child: ChildProcess | undefined;
afterAll(() => void child?.kill('SIGKILL'));

describe('the receiver example of docs/webhooks.md', () => {
  it('is in docs/webhooks.md', () => {
    expect(block).not.toBeNull();
  });

  it('answers 2xx at once, drops duplicates by id, processes by created_at, and answers 400 to a bad or old signature', async () => {
    const stack = await startWebhookStack({ env: { WEBHOOK_ALLOW_HOSTS: '127.0.0.1' } });
    await stack.dispatcher();
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/webhooks`; // behind the partner's HTTPS endpoint in real life
    const p = await stack.partnerWithWebhook(url);

    const file = path.join(mkdtempSync(path.join(tmpdir(), 'wh-example-')), 'receiver.mjs');
    writeFileSync(file, block![1]);
    const proc = spawn(process.execPath, [file], { env: { ...process.env, WEBHOOK_SECRET: p.secret, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    let out = '';
    /** when the test read each "processed <id>" line */
    const processedAt = new Map<number, number>();
    proc.stdout.on('data', (d) => {
      out += d;
      for (const m of String(d).matchAll(/processed (\d+)/g)) if (!processedAt.has(Number(m[1]))) processedAt.set(Number(m[1]), Date.now());
    });
    proc.stderr.on('data', (d) => (out += d));
    await eventually(async () => out.includes(`listening on ${port}`));

    // recorded in this order, but b happened first
    const now = Date.now();
    const a = await stack.record(p.partner.id, 'lesson.ended', { lesson_id: 'l1' }, new Date(now));
    const b = await stack.record(p.partner.id, 'lesson.started', { lesson_id: 'l1' }, new Date(now - 60_000));
    await eventually(async () => out.includes(`processed ${a.id}`) && out.includes(`processed ${b.id}`));
    const order = [...out.matchAll(/processed (\d+)/g)].map((m) => Number(m[1]));
    expect(order).toEqual([b.id, a.id]);
    for (const id of [a.id, b.id]) {
      await eventually(async () => (await attemptsOf(stack.sql, id)).length === 1);
      const [attempt] = await attemptsOf(stack.sql, id);
      expect(attempt).toMatchObject({ status_code: 204, delivered: true });
      // "at once": the dispatcher had its 204 before the event was processed (the example waits
      // ORDER_WINDOW_MS, 1 s, before processing); an order, not a time bound a loaded machine can miss
      expect(attempt.attempted_at.getTime() + attempt.duration_ms).toBeLessThan(processedAt.get(id)!);
    }

    // a redelivery is answered 2xx and not processed again
    expect((await stack.api.request('POST', `/events/${a.id}/redeliver`, { key: p.apiKey })).status).toBe(202);
    await eventually(async () => (await attemptsOf(stack.sql, a.id)).length === 2);
    expect((await attemptsOf(stack.sql, a.id))[1]).toMatchObject({ status_code: 204, delivered: true });
    await new Promise((r) => setTimeout(r, 1500));
    expect(out.match(new RegExp(`processed ${a.id} `, 'g'))).toHaveLength(1);

    // forged, stale and missing signatures
    const body = JSON.stringify({ id: 999_999, type: 'webhook.test', created_at: new Date().toISOString(), data: {} });
    const t = Math.floor(Date.now() / 1000);
    for (const sig of [signatureHeader('whsec_wrong', t, body), signatureHeader(p.secret, t - 301, body), undefined]) {
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...(sig ? { 'x-whiteboard-signature': sig } : {}) }, body });
      expect(res.status).toBe(400);
    }
    const good = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-whiteboard-signature': signatureHeader(p.secret, t, body) }, body });
    expect(good.status).toBe(204);
    await eventually(async () => out.includes('processed 999999'));
    proc.kill('SIGKILL');
  });
});
