import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../../bench/chaos/cluster.js';
import { freePort } from '../helpers/net.js';
import { spawnService, terminateBackends, type ServiceProcess } from '../helpers/process.js';
import { isolatedDatabase } from '../webhooks/helpers/stack.js';

/**
 * A role that loses Postgres or Redis stays up, says so on /readyz, and is
 * ready again once they are back: a real API process on a redis-server of this
 * file's own (killed and started again) and on a database of its own (its
 * backends terminated, which touches no other test file's connections).
 */
const databaseUrl = await isolatedDatabase();
const redis = new RedisServer(await freePort());
await redis.start();
afterAll(() => redis.kill());

async function readyz(port: number): Promise<{ status: number; body: { ready: boolean; postgres: string; redis: string } }> {
  const res = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: res.status, body: (await res.json()) as { ready: boolean; postgres: string; redis: string } };
}

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`not reached within ${ms} ms: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A process with every role (api, gateway, dispatcher) on `redisUrl`, at info level (the roles' start lines are read). */
async function allRoles(redisUrl: string): Promise<{ env: Record<string, string>; apiPort: number }> {
  const apiPort = await freePort();
  const env = { ROLES: 'api,gateway,dispatcher', API_PORT: String(apiPort), GATEWAY_PORT: String(await freePort()), REDIS_URL: redisUrl, DATABASE_URL: databaseUrl, LOG_LEVEL: 'info' };
  return { env, apiPort };
}

/** The dispatcher, the last role to start, has started (or the process ended: the caller's check says how). */
const dispatcherStarted = (api: ServiceProcess, ms?: number) =>
  until(async () => api.output(), (out) => out.includes('webhook dispatcher running') || api.child.exitCode !== null, ms);

describe('readiness through lost connections', () => {
  it('Redis killed: /readyz 503 naming redis while it is down, 200 after it is back, the process never exits', async () => {
    const port = await freePort();
    const api = await spawnService({ ROLES: 'api', API_PORT: String(port), REDIS_URL: redis.url, DATABASE_URL: databaseUrl }, `http://127.0.0.1:${port}/readyz`, 45_000);
    await redis.kill();
    const down = await until(() => readyz(port), (r) => r.status === 503);
    expect(down.body).toMatchObject({ ready: false, postgres: 'ok' });
    expect(down.body.redis).not.toBe('ok');
    await new Promise((r) => setTimeout(r, 2_000));
    await redis.start();
    const up = await until(() => readyz(port), (r) => r.status === 200);
    expect(up.body).toEqual({ ready: true, postgres: 'ok', redis: 'ok' });
    expect(api.child.exitCode).toBeNull();
    await api.stop('SIGKILL');
  }, 60_000);

  it('its Postgres backends terminated every few milliseconds while it starts (api, gateway, dispatcher): it never exits, and is ready once they stop', async () => {
    const { env, apiPort } = await allRoles(redis.url);
    const admin = postgres(databaseUrl, { max: 1, onnotice: () => {}, connection: { application_name: 'faults-killer' } });
    let api: ServiceProcess | undefined;
    let terminated = 0;
    // Every LISTEN, the dispatcher's lock and the migrations of the start meet terminated connections, for
    // 8 s (a Postgres flapping that long, well within START_RETRY_MS) or until the dispatcher, the last role, has started.
    const since = Date.now();
    const killer = (async () => {
      while (Date.now() - since < 8_000 && !api?.output().includes('webhook dispatcher running')) {
        terminated += await terminateBackends(admin);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    try {
      api = await spawnService(env, `http://127.0.0.1:${apiPort}/readyz`, 45_000);
      await killer;
      const started = api;
      expect(terminated).toBeGreaterThan(0);
      await dispatcherStarted(started, 30_000);
      expect(started.child.exitCode, started.output()).toBeNull();
      const up = await until(() => readyz(apiPort), (r) => r.status === 200);
      expect(up.body).toEqual({ ready: true, postgres: 'ok', redis: 'ok' });
      expect(started.output()).toContain('gateway listening');
    } finally {
      await killer.catch(() => {});
      await admin.end({ timeout: 1 });
      await api?.stop('SIGKILL');
    }
  }, 90_000);

  it('Redis unreachable when it starts (api, gateway, dispatcher): it waits without exiting, and is ready once Redis is up', async () => {
    const late = new RedisServer(await freePort());
    const { env, apiPort } = await allRoles(late.url);
    const starting = spawnService(env, `http://127.0.0.1:${apiPort}/readyz`, 45_000);
    try {
      await new Promise((r) => setTimeout(r, 4_000));
      await late.start();
      const api = await starting;
      await dispatcherStarted(api);
      expect(api.child.exitCode, api.output()).toBeNull();
      expect(api.output()).toContain('gateway listening');
      expect((await readyz(apiPort)).body).toEqual({ ready: true, postgres: 'ok', redis: 'ok' });
      await api.stop('SIGKILL');
    } finally {
      await starting.then((a) => a.stop('SIGKILL')).catch(() => {});
      await late.kill();
    }
  }, 60_000);

  it('every Postgres backend of the process terminated five times: it stays up and /readyz answers 200 again', async () => {
    const port = await freePort();
    const api = await spawnService({ ROLES: 'api,dispatcher', API_PORT: String(port), REDIS_URL: redis.url, DATABASE_URL: databaseUrl }, `http://127.0.0.1:${port}/readyz`, 45_000);
    const admin = postgres(databaseUrl, { max: 1, onnotice: () => {}, connection: { application_name: 'faults-killer' } });
    try {
      for (let i = 0; i < 5; i++) {
        await terminateBackends(admin);
        await new Promise((r) => setTimeout(r, 300));
      }
      // a refused connection means the process died: say how, with what it printed
      const up = await until(() => readyz(port), (r) => r.status === 200).catch((err: Error) => {
        throw new Error(`${err.message}; exit code ${api.child.exitCode}, signal ${api.child.signalCode}; output:\n${api.output()}`);
      });
      expect(up.body.postgres).toBe('ok');
      expect(api.child.exitCode, api.output()).toBeNull();
    } finally {
      await admin.end({ timeout: 1 });
      await api.stop('SIGKILL');
    }
  }, 60_000);
});
