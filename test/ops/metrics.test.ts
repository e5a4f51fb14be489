import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { DESCRIPTOR_RESERVE, softOpenFilesLimit } from '../../realtime/admission/ConnectionCap.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { partnerFactory } from '../helpers/factories.js';
import { freePort } from '../helpers/net.js';
import { spawnService } from '../helpers/process.js';
import { answer, startReceiver } from '../webhooks/helpers/receiver.js';
import { eventually } from '../helpers/wait.js';
import { attemptsOf, deliveryOf, startWebhookStack } from '../webhooks/helpers/stack.js';
import { join } from '../realtime/helpers/client.js';
import { lessonWithLinks } from '../realtime/helpers/fixtures.js';
import { families, heldPost, scrape, value } from './helpers.js';

/**
 * Each role, started as a real process with METRICS_PORT, serves /metrics on
 * that port only; its families exist from the start and move with traffic; no label carries an
 * id, key or token.
 */
const stack = await startWebhookStack({ env: { WEBHOOK_ALLOW_HOSTS: '127.0.0.1' } });
const PROCESS_FAMILIES = ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_heap_size_used_bytes', 'lessons_ready'];
const API = '/api/partner/v1';

async function role(env: Record<string, string>, readyOn: 'metrics' | 'api' | 'gateway') {
  const [metricsPort, apiPort, gatewayPort] = [await freePort(), await freePort(), await freePort()];
  const ports = { METRICS_PORT: String(metricsPort), API_PORT: String(apiPort), GATEWAY_PORT: String(gatewayPort) };
  const port = readyOn === 'gateway' ? gatewayPort : apiPort;
  const ready = readyOn === 'metrics' ? `http://127.0.0.1:${metricsPort}/readyz` : `http://127.0.0.1:${port}/readyz`;
  // generous: six helpers share two cores, and a cold tsx start under that load can take a minute
  const child = await spawnService({ ...stack.env, ...ports, ...env }, ready, 100_000);
  return { child, port, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics` };
}

describe('metrics', () => {
  it('api: request durations by route pattern and status, 429s by scope, requests in flight; never on the API port', async () => {
    const { port, metricsUrl } = await role(
      { ROLES: 'api', RATE_LIMIT_PER_MINUTE: '4', RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: '2', REDIS_KEY_PREFIX: `${inject('redisPrefix')}opsm${randomBase62(6)}:` },
      'metrics',
    );
    const before = await scrape(metricsUrl);
    expect(before.status).toBe(200);
    expect(before.type).toMatch(/^text\/plain; version=0\.0\.4/);
    const fams = families(before.text);
    for (const f of [...PROCESS_FAMILIES, 'lessons_api_request_duration_seconds', 'lessons_api_rate_limited_total', 'lessons_api_requests_in_flight']) expect(fams, f).toContain(f);
    expect(value(before.samples, 'lessons_ready', { dependency: 'postgres' })).toBe(1);
    expect(value(before.samples, 'lessons_ready', { dependency: 'redis' })).toBe(1);
    expect(value(before.samples, 'lessons_api_rate_limited_total', { scope: 'api_key' })).toBe(0);
    expect(value(before.samples, 'lessons_api_rate_limited_total', { scope: 'unauthenticated' })).toBe(0);
    // /metrics is not on the public port
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(404);

    const p = await partnerFactory(stack.sql);
    const headers = { authorization: `Bearer ${p.apiKey}`, 'content-type': 'application/json' };
    const created = await fetch(`http://127.0.0.1:${port}${API}/lessons`, { method: 'POST', headers, body: JSON.stringify({ title: 'metrics' }) });
    expect(created.status).toBe(201);
    const lesson = (await created.json()) as { id: string };
    for (let i = 0; i < 2; i++) expect((await fetch(`http://127.0.0.1:${port}${API}/lessons/${lesson.id}`, { headers })).status).toBe(200);
    const slow = heldPost(port, `${API}/lessons`, p.apiKey, JSON.stringify({ title: 'slow' }));
    await eventually(async () => value((await scrape(metricsUrl)).samples, 'lessons_api_requests_in_flight') === 1);
    // the key's 5th request in the minute, and the address's 3rd without a key
    expect((await fetch(`http://127.0.0.1:${port}${API}/lessons/${lesson.id}`, { headers })).status).toBe(429);
    // keyless: 401 until the address's allowance (2 a minute, the key's first lookup took one of it) is spent
    const keyless: number[] = [];
    while (keyless.at(-1) !== 429 && keyless.length < 5) keyless.push((await fetch(`http://127.0.0.1:${port}${API}/balance`)).status);
    expect(keyless.at(-1)).toBe(429);
    expect(keyless.slice(0, -1).every((s) => s === 401)).toBe(true);
    expect(await slow.finish()).toMatch(/^HTTP\/1\.1 201/);

    const after = await scrape(metricsUrl);
    const d = 'lessons_api_request_duration_seconds_count';
    expect(value(after.samples, d, { route: `${API}/lessons/:id`, method: 'GET', status: '200' })).toBe(2);
    expect(value(after.samples, d, { route: `${API}/lessons`, method: 'POST', status: '201' })).toBe(2);
    expect(value(after.samples, d, { route: `${API}/lessons/:id`, method: 'GET', status: '429' })).toBe(1);
    expect(value(after.samples, d, { route: `${API}/balance`, status: '401' })).toBe(keyless.length - 1);
    expect(value(after.samples, d, { route: `${API}/balance`, status: '429' })).toBe(1);
    expect(value(after.samples, 'lessons_api_rate_limited_total', { scope: 'api_key' })).toBe(1);
    expect(value(after.samples, 'lessons_api_rate_limited_total', { scope: 'unauthenticated' })).toBe(1);
    expect(value(after.samples, 'lessons_api_requests_in_flight')).toBe(0);
    expect(value(after.samples, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    // patterns only: no lesson id, partner id or key anywhere
    for (const secret of [lesson.id, p.partner.id, p.apiKey, p.keyId]) expect(after.text).not.toContain(secret);
  }, 180_000);

  it('dispatcher: outbox depth and oldest due age (from Postgres on scrape), deliveries by result, latency, attempts per event', async () => {
    // the first request is answered after 1.5 s (scraped meanwhile), every later one 500
    const rx = await startReceiver({ http: true, behaviour: (req, res, n) => (n === 0 ? setTimeout(() => answer(200)(req, res, n), 1500) : answer(500)(req, res, n)) });
    afterAll(() => rx.close());
    const p = await stack.partnerWithWebhook(`${rx.url}/hook`);
    const { metricsUrl } = await role({ ROLES: 'dispatcher', WEBHOOK_RETRY_SCHEDULE: '3600' }, 'metrics');
    const before = await scrape(metricsUrl);
    const fams = families(before.text);
    for (const f of [
      ...PROCESS_FAMILIES,
      'lessons_webhook_outbox_depth',
      'lessons_webhook_outbox_oldest_due_age_seconds',
      'lessons_webhook_deliveries_total',
      'lessons_webhook_delivery_duration_seconds',
      'lessons_webhook_attempts_per_event',
    ]) expect(fams, f).toContain(f);
    expect(value(before.samples, 'lessons_webhook_deliveries_total')).toBe(0);

    const e1 = await stack.record(p.partner.id);
    await rx.waitFor(1, 10_000);
    // scraped while the receiver holds its answer: the due age grows past 0.2 s as the attempt waits
    const during = await eventually(async () => {
      const s = await scrape(metricsUrl);
      return value(s.samples, 'lessons_webhook_outbox_oldest_due_age_seconds') > 0.2 && s;
    }, 'an oldest due age past 0.2 s');
    expect(value(during.samples, 'lessons_webhook_outbox_depth', { when: 'due' })).toBe(1);
    await eventually(async () => (await deliveryOf(stack.sql, Number(e1.id))).state === 'delivered');

    const e2 = await stack.record(p.partner.id);
    await eventually(async () => (await attemptsOf(stack.sql, Number(e2.id))).length === 1);
    const after = await scrape(metricsUrl);
    expect(value(after.samples, 'lessons_webhook_deliveries_total', { result: 'delivered' })).toBe(1);
    expect(value(after.samples, 'lessons_webhook_deliveries_total', { result: 'http_error' })).toBe(1);
    expect(value(after.samples, 'lessons_webhook_delivery_duration_seconds_count')).toBe(2);
    expect(value(after.samples, 'lessons_webhook_delivery_duration_seconds_sum')).toBeGreaterThan(1.4);
    expect(value(after.samples, 'lessons_webhook_attempts_per_event_count', { outcome: 'delivered' })).toBe(1);
    expect(value(after.samples, 'lessons_webhook_attempts_per_event_bucket', { outcome: 'delivered', le: '1' })).toBe(1);
    // e2 waits an hour for its retry: pending, not due
    expect(value(after.samples, 'lessons_webhook_outbox_depth', { when: 'all' })).toBe(1);
    expect(value(after.samples, 'lessons_webhook_outbox_depth', { when: 'due' })).toBe(0);
    expect(value(after.samples, 'lessons_webhook_outbox_oldest_due_age_seconds')).toBe(0);
    expect(value(after.samples, 'lessons_webhook_outbox_scrape_errors_total')).toBe(0);
    for (const secret of [p.partner.id, rx.url]) expect(after.text).not.toContain(secret);
  }, 180_000);

  it('a process running every role (npm start) serves one registry with every role\'s families', async () => {
    // the metrics listener starts after every role: ready there means all are up
    const { metricsUrl } = await role({ ROLES: 'api,gateway,dispatcher' }, 'metrics');
    const { status, text } = await scrape(metricsUrl);
    expect(status).toBe(200);
    const fams = families(text);
    for (const f of ['lessons_ready', 'lessons_api_request_duration_seconds', 'lessons_webhook_outbox_depth', 'lessons_gateway_connections', 'process_cpu_user_seconds_total']) expect(fams, f).toContain(f);
    // each family once
    expect(text.match(/^# TYPE lessons_ready /gm)).toHaveLength(1);
  }, 180_000);

  it('gateway: every family is served on METRICS_PORT, process metrics move; a real join and a message move the gateway families', async () => {
    // the meter flushes every second (5 s by default) once a lesson is served here, so the wait for the
    // first flush below is short; before the join nothing is served and nothing flushes
    const { port, metricsUrl } = await role({ ROLES: 'gateway', GATEWAY_METER_FLUSH_SECONDS: '1' }, 'gateway');
    const first = await scrape(metricsUrl);
    const fams = families(first.text);
    for (const f of [
      ...PROCESS_FAMILIES,
      'lessons_gateway_connections',
      'lessons_gateway_joins_total',
      'lessons_gateway_join_duration_seconds',
      'lessons_gateway_messages_in_total',
      'lessons_gateway_messages_out_total',
      'lessons_gateway_fanout_duration_seconds',
      'lessons_gateway_closes_total',
      'lessons_gateway_lessons_open',
      'lessons_gateway_sessions_running',
      'lessons_gateway_meter_flush_lag_seconds',
      'lessons_gateway_store_call_duration_seconds',
      'lessons_gateway_upgrades_refused_total',
      'lessons_gateway_connection_cap',
    ]) expect(fams, f).toContain(f);
    // the automatic cap (GATEWAY_MAX_CONNECTIONS=0): below the descriptor limit this process was started with
    const soft = softOpenFilesLimit(readFileSync('/proc/self/limits', 'utf8'));
    if (soft !== undefined) expect(value(first.samples, 'lessons_gateway_connection_cap')).toBeLessThanOrEqual(soft - DESCRIPTOR_RESERVE);
    expect(value(first.samples, 'lessons_gateway_connection_cap')).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).not.toBe(200);
    for (let i = 0; i < 50; i++) await (await fetch(`http://127.0.0.1:${port}/embed/not-a-token-${i}`)).text();
    // as soon as a scrape counts the CPU those requests took
    const second = await eventually(async () => {
      const s = await scrape(metricsUrl);
      return value(s.samples, 'process_cpu_user_seconds_total') > value(first.samples, 'process_cpu_user_seconds_total') && s;
    }, 'the CPU counter to move');
    // the flush-lag gauge counts from start until the meter reports its first flush
    expect(value(second.samples, 'lessons_gateway_meter_flush_lag_seconds')).toBeGreaterThan(value(first.samples, 'lessons_gateway_meter_flush_lag_seconds'));

    // a real join and a message move the gateway's own families
    const { link, lesson } = await lessonWithLinks(stack.sql);
    const wsUrl = async (user: string) => `ws://127.0.0.1:${port}/ws?token=${encodeURIComponent(await link(user))}`;
    const a = await join(await wsUrl('metrics-a'));
    const b = await join(await wsUrl('metrics-b'));
    a.send({ type: 'cursor', x: 1, y: 2 });
    await b.waitType('cursor');
    const during = await scrape(metricsUrl);
    expect(value(during.samples, 'lessons_gateway_connections')).toBe(2);
    expect(value(during.samples, 'lessons_gateway_lessons_open')).toBe(1);
    expect(value(during.samples, 'lessons_gateway_joins_total')).toBe(2);
    expect(value(during.samples, 'lessons_gateway_join_duration_seconds_count')).toBe(2);
    expect(value(during.samples, 'lessons_gateway_messages_in_total', { type: 'cursor' })).toBe(1);
    expect(value(during.samples, 'lessons_gateway_messages_out_total', { type: 'cursor' })).toBeGreaterThanOrEqual(1);
    expect(value(during.samples, 'lessons_gateway_messages_out_total', { type: 'welcome' })).toBe(2);
    expect(value(during.samples, 'lessons_gateway_fanout_duration_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(value(during.samples, 'lessons_gateway_store_call_duration_seconds_count', { store: 'redis', op: 'presence.join' })).toBe(2);
    expect(value(during.samples, 'lessons_gateway_store_call_duration_seconds_count', { store: 'postgres', op: 'meter.seed' })).toBeGreaterThanOrEqual(1);
    // two people: the session runs, and the meter flushes (GATEWAY_METER_FLUSH_SECONDS) resetting the lag
    await eventually(async () => {
      const s = (await scrape(metricsUrl)).samples;
      return value(s, 'lessons_gateway_sessions_running') === 1 && value(s, 'lessons_gateway_store_call_duration_seconds_count', { store: 'postgres', op: 'meter.flush' }) >= 1;
    }, 'a running session and a meter flush', 20_000);
    expect(value((await scrape(metricsUrl)).samples, 'lessons_gateway_meter_flush_lag_seconds')).toBeLessThan(10);
    await a.close();
    await b.close();
    await eventually(async () => value((await scrape(metricsUrl)).samples, 'lessons_gateway_closes_total', { code: '1000' }) === 2, 'two closes with 1000');
    const after = await scrape(metricsUrl);
    expect(value(after.samples, 'lessons_gateway_connections')).toBe(0);
    expect(value(after.samples, 'lessons_gateway_lessons_open')).toBe(0);
    // no lesson id, link token or user id in any label
    expect(after.text).not.toContain(lesson.id);
    expect(after.text).not.toContain('metrics-a');
  }, 180_000);
});
