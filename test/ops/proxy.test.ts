import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { afterAll, describe, expect, it } from 'vitest';
import { fileDeps } from '../helpers/deps.js';
import { partnerFactory } from '../helpers/factories.js';
import { freePort } from '../helpers/net.js';
import { spawnService } from '../helpers/process.js';
import { eventually } from '../helpers/wait.js';

/**
 * Through the fleet's real proxy config: deploy/Caddyfile, with the compose
 * host names replaced by loopback ports, in front of a real API process (TRUST_PROXY_HOPS=1) and a
 * real gateway process; the second gateway of the file points at a port where nothing listens, so
 * every arrival must still reach the live one. Needs the `caddy` binary (Debian's package); without
 * it this file is skipped and test/ops/compose.test.ts still checks the file's routes as text.
 */
const hasCaddy = spawnSync('caddy', ['version'], { stdio: 'ignore' }).status === 0;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe.skipIf(!hasCaddy)('the proxy of the compose fleet (deploy/Caddyfile)', async () => {
  const deps = fileDeps();
  const [apiPort, gwPort, deadPort, proxyPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  await spawnService({ ROLES: 'api', API_PORT: String(apiPort), TRUST_PROXY_HOPS: '1', EMBED_BASE_URL: `http://127.0.0.1:${proxyPort}` }, `http://127.0.0.1:${apiPort}/readyz`, 100_000);
  await spawnService({ ROLES: 'gateway', GATEWAY_PORT: String(gwPort), GATEWAY_TRUST_PROXY: 'true' }, `http://127.0.0.1:${gwPort}/readyz`, 100_000);

  const config = readFileSync(new URL('../../deploy/Caddyfile', import.meta.url), 'utf8')
    .replace(/^:80 \{/m, `:${proxyPort} {`)
    .replace('gateway-1:8081 gateway-2:8081', `127.0.0.1:${gwPort} 127.0.0.1:${deadPort}`)
    .replace('api:8080', `127.0.0.1:${apiPort}`);
  expect(config).toContain(`127.0.0.1:${deadPort}`);
  const dir = mkdtempSync(join(tmpdir(), 'ops-caddy-'));
  writeFileSync(join(dir, 'Caddyfile'), config);
  const caddy: ChildProcess = spawn('caddy', ['run', '--adapter', 'caddyfile', '--config', join(dir, 'Caddyfile')], { stdio: 'ignore', env: { ...process.env, HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir } });
  afterAll(() => {
    caddy.kill('SIGKILL');
  });
  const base = `http://127.0.0.1:${proxyPort}`;
  await eventually(async () => (await fetch(`${base}/healthz`).catch(() => null))?.ok, 'the proxy', 20_000, 100);

  it('sends the partner API to the API, with the proxy’s request id replacing the client’s, echoed as X-Request-Id', async () => {
    const p = await partnerFactory(deps.sql);
    const res = await fetch(`${base}/api/partner/v1/balance`, { headers: { authorization: `Bearer ${p.apiKey}`, 'x-request-id': 'forged-by-client' } });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-request-id')!;
    expect(id).toMatch(UUID);
    const again = await fetch(`${base}/api/partner/v1/balance`, { headers: { authorization: `Bearer ${p.apiKey}` } });
    expect(again.headers.get('x-request-id')).toMatch(UUID);
    expect(again.headers.get('x-request-id')).not.toBe(id);
  });

  it('sends /embed/<token>, the page’s assets and the /ws WebSocket to a live gateway: a participant joins through it', async () => {
    const p = await partnerFactory(deps.sql);
    const headers = { authorization: `Bearer ${p.apiKey}`, 'content-type': 'application/json' };
    const lesson = (await (await fetch(`${base}/api/partner/v1/lessons`, { method: 'POST', headers, body: JSON.stringify({ title: 'proxy' }) })).json()) as { id: string };
    const link = (await (
      await fetch(`${base}/api/partner/v1/lessons/${lesson.id}/links`, { method: 'POST', headers, body: JSON.stringify({ user: { id: 'u1', name: 'Ann', role: 'teacher' } }) })
    ).json()) as { url: string; token: string };
    expect(link.url).toBe(`${base}/embed/${link.token}`);

    for (let i = 0; i < 4; i++) {
      // several times: the dead second upstream must never be the answer
      const page = await fetch(link.url);
      expect(page.status).toBe(200);
      const html = await page.text();
      const asset = /["'](\/web\/assets\/[^"']+)["']/.exec(html)?.[1];
      expect(asset, html.slice(0, 500)).toBeDefined();
      expect((await fetch(`${base}${asset}`)).status).toBe(200);
    }

    const ws = new WebSocket(`ws://127.0.0.1:${proxyPort}/ws?token=${encodeURIComponent(link.token)}`);
    const first = await new Promise<{ type: string }>((resolve, reject) => {
      ws.once('message', (d) => resolve(JSON.parse(String(d))));
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade answered ${res.statusCode}`)));
    });
    expect(first.type).toBe('welcome');
    ws.close();
  });
});
