import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { inject } from 'vitest';
import { migrate } from '../../../src/db/migrate.js';
import type { Deps } from '../../../src/deps.js';
import { recordEvent, type EventType } from '../../../src/events/outbox.js';
import type { Clock } from '../../../src/lib/clock.js';
import { randomBase62 } from '../../../src/lib/crypto.js';
import type { Resolver } from '../../../src/webhooks/address.js';
import { startDispatcher } from '../../../src/webhooks/index.js';
import { buildWebhookRuntime } from '../../../src/webhooks/runtime.js';
import { startApi } from '../../../src/server.js';
import { PREFIX, type ApiResponse } from '../../helpers/api.js';
import { makeDeps } from '../../helpers/deps.js';
import { atFileEnd } from '../../helpers/fileEnd.js';
import { partnerFactory } from '../../helpers/factories.js';
import { testCa } from './tls.js';

let orphansSwept = false;

/**
 * A database of this test file's own, migrated from scratch and dropped at the
 * end. Webhook tests need it: a dispatcher takes every due delivery of its
 * database, and tests that move a ManualClock must not share due rows with
 * dispatchers of other test files (or of other helpers' service processes).
 * Databases of earlier runs whose run database is gone (a killed run) are dropped first.
 */
export async function isolatedDatabase(): Promise<string> {
  const url = new URL(inject('databaseUrl'));
  const run = url.pathname.slice(1);
  const name = `${run}_wh${randomBase62(6).toLowerCase()}`;
  url.pathname = `/${name}`;
  const admin = new URL(url);
  admin.pathname = '/postgres';
  if (!orphansSwept) {
    orphansSwept = true;
    const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
    const orphans = await sql<{ datname: string }[]>`
      SELECT w.datname FROM pg_database w
      WHERE w.datname ~ '^lessons_test_[a-z0-9]+_wh[a-z0-9]{6}$'
        AND NOT EXISTS (SELECT 1 FROM pg_database b WHERE b.datname = substring(w.datname FROM '^(lessons_test_[a-z0-9]+)_wh'))`;
    for (const o of orphans) await sql.unsafe(`DROP DATABASE IF EXISTS "${o.datname}" WITH (FORCE)`).catch(() => {});
    await sql.end();
  }
  await migrate(url.toString());
  atFileEnd(async () => {
    const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
    await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await sql.end();
  });
  return url.toString();
}

/** A real partner API on a free loopback port (like test/helpers/api.ts, with cleanup that also runs for stacks made inside tests). */
async function startStackApi(env: Record<string, string>, resolve: Resolver, clock?: Clock) {
  const base = makeDeps({ env, clock });
  const deps = { ...base, webhookRuntime: buildWebhookRuntime(base.config, { resolve, ca: testCa() }) };
  const api = await startApi(deps, 0);
  atFileEnd(async () => {
    await api.close();
    await deps.close();
  });
  async function request<T = any>(method: string, path: string, o: { key?: string | null; body?: unknown } = {}): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = {};
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    let body: string | undefined;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(`http://127.0.0.1:${api.port}${path.startsWith(PREFIX) ? path : PREFIX + path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }
  return { deps, port: api.port, request };
}

export interface StackOptions {
  env?: Record<string, string>;
  clock?: Clock;
  /** DNS for the API's checks and every dispatcher; default: `hook.test` and `*.hook.test` -> 127.0.0.1 */
  resolve?: Resolver;
}

export const loopbackResolver: Resolver = async (host) => {
  if (host === 'hook.test' || host.endsWith('.hook.test')) return ['127.0.0.1'];
  throw Object.assign(new Error(`test resolver: unknown host ${host}`), { code: 'ENOTFOUND' });
};

/**
 * A real partner API and (on demand) real dispatchers on an isolated database,
 * trusting the test CA, with `127.0.0.1` and `hook.test` allowed (loopback
 * receivers) and a short poll.
 */
export async function startWebhookStack(opts: StackOptions = {}) {
  const databaseUrl = await isolatedDatabase();
  const env: Record<string, string> = {
    DATABASE_URL: databaseUrl,
    WEBHOOK_ALLOW_HOSTS: '127.0.0.1,hook.test,a.hook.test,b.hook.test',
    WEBHOOK_SECRET_KEYS: randomBytes(32).toString('base64'),
    WEBHOOK_POLL_MS: '100',
    ...opts.env,
  };
  const resolve = opts.resolve ?? loopbackResolver;
  const api = await startStackApi(env, resolve, opts.clock);

  /** A dispatcher with deps of its own (its own pool and connections, like another process). */
  async function dispatcher(o: { env?: Record<string, string>; clock?: Clock; resolve?: Resolver; ca?: string | string[] } = {}) {
    const base = makeDeps({ env: { ...env, ...o.env }, clock: o.clock ?? opts.clock });
    const deps = { ...base, webhookRuntime: buildWebhookRuntime(base.config, { resolve: o.resolve ?? resolve, ca: 'ca' in o ? o.ca : testCa() }) };
    const d = await startDispatcher(deps);
    let closed = false;
    const close = async () => {
      if (closed) return;
      closed = true;
      await d.close();
      await deps.close();
    };
    atFileEnd(close);
    return { ...d, deps, close };
  }

  /** A partner whose webhook points at `url` (through the real PUT /webhook); returns its secret too. */
  async function partnerWithWebhook(url: string) {
    const p = await partnerFactory(api.deps.sql);
    const res = await api.request('PUT', '/webhook', { key: p.apiKey, body: { url } });
    if (res.status !== 200) throw new Error(`PUT /webhook answered ${res.status}: ${res.text}`);
    return { ...p, secret: res.body.secret as string };
  }

  /** Records an event the way the gateway does: recordEvent inside a transaction. */
  async function record(partnerId: string, type: EventType = 'lesson.started', data: Record<string, unknown> = { lesson_id: 'lsn_x' }, at?: Date) {
    return api.deps.sql.begin((tx) => recordEvent(tx, partnerId, type, data, at ?? (opts.clock ?? api.deps.clock).now()));
  }

  return { api, env, databaseUrl, dispatcher, partnerWithWebhook, record, sql: api.deps.sql as Deps['sql'] };
}

export async function deliveryOf(sql: Deps['sql'], eventId: number) {
  const [row] = await sql<{ state: string; attempts: number; round: number; next_attempt_at: Date | null; claimed_by: number | null }[]>`
    SELECT state, attempts, round, next_attempt_at, claimed_by FROM webhook_deliveries WHERE event_id = ${eventId}`;
  return row;
}

export async function attemptsOf(sql: Deps['sql'], eventId: number) {
  return sql<{ attempt: number; round: number; status_code: number | null; error: string | null; delivered: boolean; attempted_at: Date; duration_ms: number; dispatcher: number; address: string | null }[]>`
    SELECT attempt, round, status_code, error, delivered, attempted_at, duration_ms, dispatcher, address
    FROM webhook_attempts WHERE event_id = ${eventId} ORDER BY id`;
}
