import { afterAll, describe, expect, it } from 'vitest';
import { partnerFactory } from '../helpers/factories.js';
import { heldPost, scrape, value } from './helpers.js';
import { freePort } from '../helpers/net.js';
import { spawnService } from '../helpers/process.js';
import { answer, startReceiver } from '../webhooks/helpers/receiver.js';
import { eventually } from '../helpers/wait.js';
import { attemptsOf, deliveryOf, startWebhookStack } from '../webhooks/helpers/stack.js';

/**
 * For the API and the dispatcher, with real processes and SIGTERM: the API stops
 * accepting, finishes what is in flight (bounded by SHUTDOWN_TIMEOUT_SECONDS) and exits 0; the
 * dispatcher records the attempts it has in flight, claims nothing new, and exits 0.
 */
const stack = await startWebhookStack({ env: { WEBHOOK_ALLOW_HOSTS: '127.0.0.1' } });
const API = '/api/partner/v1';

const exitOf = (child: import('node:child_process').ChildProcess) =>
  new Promise<{ code: number | null; at: number }>((r) =>
    child.exitCode !== null ? r({ code: child.exitCode, at: Date.now() }) : child.once('exit', (code) => r({ code, at: Date.now() })),
  );

async function apiProcess(env: Record<string, string> = {}) {
  const [port, metricsPort] = [await freePort(), await freePort()];
  const child = await spawnService(
    { ...stack.env, ROLES: 'api', API_PORT: String(port), METRICS_PORT: String(metricsPort), LOG_LEVEL: 'info', ...env },
    `http://127.0.0.1:${port}/readyz`,
    100_000,
  );
  /** Resolves once the API counts a request in flight (its headers read): a held request is then being served. */
  const inFlight = () =>
    eventually(async () => value((await scrape(`http://127.0.0.1:${metricsPort}/metrics`)).samples, 'lessons_api_requests_in_flight') === 1, 'the held request in flight');
  return { ...child, port, inFlight };
}

describe('graceful exit', () => {
  it('api: on SIGTERM refuses new connections, answers the request in flight (Connection: close) and exits 0', async () => {
    const api = await apiProcess();
    const p = await partnerFactory(stack.sql);
    const held = heldPost(api.port, `${API}/lessons`, p.apiKey, JSON.stringify({ title: 'in flight at SIGTERM' }));
    // a keep-alive connection that is idle at SIGTERM is closed, not kept waiting
    await eventually(async () => (await fetch(`http://127.0.0.1:${api.port}/healthz`)).ok);
    await api.inFlight(); // the held request is being read
    const exited = exitOf(api.child);
    api.child.kill('SIGTERM');
    await eventually(async () => api.output().includes('finishing requests in flight'), 'the API to start finishing', 10_000);
    await expect(fetch(`http://127.0.0.1:${api.port}/healthz`)).rejects.toThrow();
    expect(api.child.exitCode).toBeNull(); // still serving the held request
    await new Promise((r) => setTimeout(r, 500));
    expect(api.child.exitCode).toBeNull();
    held.rest();
    await held.closed;
    expect(held.response()).toMatch(/^HTTP\/1\.1 201 /);
    expect(held.response()).toMatch(/\r\nconnection: close\r\n/i);
    const { code } = await exited;
    expect(code, api.output()).toBe(0);
    const [row] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM lessons WHERE partner_id = ${p.partner.id}`;
    expect(row.n).toBe(1);
  }, 180_000);

  it('api: a request still unfinished at SHUTDOWN_TIMEOUT_SECONDS is cut, and the process exits 0 then', async () => {
    const api = await apiProcess({ SHUTDOWN_TIMEOUT_SECONDS: '1' });
    const p = await partnerFactory(stack.sql);
    const held = heldPost(api.port, `${API}/lessons`, p.apiKey, JSON.stringify({ title: 'in flight at SIGTERM' }));
    await api.inFlight();
    const signalled = Date.now();
    const exited = exitOf(api.child);
    api.child.kill('SIGTERM');
    const { code, at } = await exited;
    expect(code, api.output()).toBe(0);
    expect(at - signalled).toBeGreaterThanOrEqual(900);
    expect(at - signalled).toBeLessThan(8000);
    await held.closed;
    expect(api.output()).toContain('requests still in flight at the deadline are cut');
  }, 180_000);

  it('dispatcher: on SIGTERM the delivery in flight finishes and is recorded, nothing new is claimed, exit 0', async () => {
    // each request is answered 2 s after it arrives
    const rx = await startReceiver({ http: true, behaviour: (req, res, n) => setTimeout(() => answer(200)(req, res, n), 2000) });
    afterAll(() => rx.close());
    const p = await stack.partnerWithWebhook(`${rx.url}/drain`);
    const metricsPort = await freePort();
    const d = await spawnService(
      { ...stack.env, ROLES: 'dispatcher', METRICS_PORT: String(metricsPort), LOG_LEVEL: 'debug', WEBHOOK_TIMEOUT_MS: '8000' },
      `http://127.0.0.1:${metricsPort}/readyz`,
      100_000,
    );
    const e1 = await stack.record(p.partner.id);
    const [first] = await rx.waitFor(1, 10_000);
    const exited = exitOf(d.child);
    d.child.kill('SIGTERM');
    await eventually(async () => d.output().includes('shutting down'), 'the dispatcher to shut down', 10_000);
    // due now, after the signal: must wait for another dispatcher
    const e2 = await stack.record(p.partner.id);
    const { code, at } = await exited;
    expect(code, d.output()).toBe(0);
    expect(at).toBeGreaterThanOrEqual(first.at + 2000); // it waited for the answer
    expect(await attemptsOf(stack.sql, Number(e1.id))).toEqual([expect.objectContaining({ attempt: 1, delivered: true, status_code: 200 })]);
    expect((await deliveryOf(stack.sql, Number(e1.id))).state).toBe('delivered');
    expect(rx.requests.map((r) => r.headers['x-whiteboard-delivery'])).toEqual([String(e1.id)]);
    const left = await deliveryOf(stack.sql, Number(e2.id));
    expect(left).toMatchObject({ state: 'pending', attempts: 0, claimed_by: null });
    // its log lines name the event, the delivery id the partner sees, the round and the attempt
    const lines = d.output().split('\n').filter((l) => l.includes('"msg":"delivered"')).map((l) => JSON.parse(l));
    expect(lines).toEqual([expect.objectContaining({ component: 'dispatcher', event_id: Number(e1.id), delivery: String(e1.id), round: 1, attempt: 1, partner_id: p.partner.id })]);
    expect(d.output()).toContain('finishing deliveries in flight');
  }, 180_000);
});
