import { afterAll, describe, expect, it } from 'vitest';
import { createSql } from '../../src/db/index.js';
import { recordEvent } from '../../src/events/outbox.js';
import { DISPATCHER_LOCK_CLASS } from '../../src/db/locks.js';
import { freePort } from '../helpers/net.js';
import { spawnService, type ServiceProcess } from '../helpers/process.js';
import { answer, startReceiver } from '../webhooks/helpers/receiver.js';
import { eventually } from '../helpers/wait.js';
import { attemptsOf, deliveryOf, startWebhookStack } from '../webhooks/helpers/stack.js';

/**
 * Losing a dispatcher's lock or its connections never turns
 * into a redelivery storm. Real dispatcher processes, real Postgres backends
 * terminated with pg_terminate_backend, a real loopback receiver.
 */
const stack = await startWebhookStack({ env: { WEBHOOK_ALLOW_HOSTS: '127.0.0.1', WEBHOOK_TIMEOUT_MS: '1000' } });
const dbName = new URL(stack.databaseUrl).pathname.slice(1);
// The test's own connection: named so the kills below never hit it.
const driver = createSql(stack.databaseUrl, { max: 2, name: 'faults-driver' });
afterAll(() => driver.end({ timeout: 1 }));

async function dispatcherProcess(env: Record<string, string> = {}): Promise<ServiceProcess> {
  const port = await freePort();
  return spawnService({ ...stack.env, ROLES: 'api,dispatcher', API_PORT: String(port), ...env }, `http://127.0.0.1:${port}/readyz`, 45_000);
}

/** Terminates the service's backends in this test's database: the dispatchers' lock connections, or all of them. */
async function kill(which: 'lock' | 'all'): Promise<number> {
  const rows = await driver<{ n: number }[]>`
    SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
    WHERE datname = ${dbName} AND pid <> pg_backend_pid()
      AND ${which === 'lock' ? driver`application_name = 'lessons-dispatcher-lock'` : driver`application_name LIKE 'lessons%'`}`;
  return rows[0].n;
}

async function locksHeld(): Promise<number> {
  const [r] = await driver<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database db ON db.oid = l.database
    WHERE l.locktype = 'advisory' AND l.classid = ${DISPATCHER_LOCK_CLASS}::bigint::oid AND l.granted AND db.datname = ${dbName}`;
  return r.n;
}

const record = (partnerId: string, i: number) =>
  driver.begin((tx) => recordEvent(tx, partnerId, 'lesson.started', { lesson_id: `lsn_${i}` }, new Date()));

/** A later event delivered (to a receiver of its own): the dispatchers' polls went past whatever came before it. */
async function probeDelivered(): Promise<void> {
  const rx = await startReceiver({ http: true });
  const p = await stack.partnerWithWebhook(`${rx.url}/probe`);
  const ev = await record(p.partner.id, -1);
  await eventually(async () => (await deliveryOf(driver, ev.id)).state === 'delivered', 'a later event delivered', 30_000);
  await rx.close();
}

describe('dispatcher under connection loss', () => {
  it('losing the lock connection while an attempt is in flight re-sends nothing: one request, one logged attempt, the lock taken again', async () => {
    // answers after 1.5 s, while the lock connection is killed three times
    const rx = await startReceiver({ http: true, behaviour: (req, res, n) => setTimeout(() => answer(200)(req, res, n), 1500) });
    const p = await stack.partnerWithWebhook(`${rx.url}/one`);
    const child = await dispatcherProcess({ WEBHOOK_TIMEOUT_MS: '5000' });
    await eventually(async () => (await locksHeld()) === 1);
    const ev = await record(p.partner.id, 0);
    await rx.waitFor(1, 10_000);
    for (let i = 0; i < 3; i++) {
      // as soon as the dispatcher has its lock connection again (a loaded machine takes more than 300 ms)
      expect(await eventually(async () => (await kill('lock')) === 1, 'a lock connection to kill')).toBe(true);
      await new Promise((r) => setTimeout(r, 300));
    }
    await eventually(async () => (await deliveryOf(driver, ev.id)).state === 'delivered');
    await probeDelivered(); // polls after the answer
    expect(rx.requests).toHaveLength(1);
    expect(await attemptsOf(driver, ev.id)).toEqual([expect.objectContaining({ attempt: 1, delivered: true })]);
    await eventually(async () => (await locksHeld()) === 1); // taken again
    expect(child.child.exitCode).toBeNull();
    await child.stop();
    await rx.close();
  }, 60_000);

  it('backends killed every 300 ms during a burst to two dispatcher processes: every event delivered, none more than twice, every request in the delivery log, no exit', async () => {
    const rx = await startReceiver({ http: true, behaviour: (req, res, n) => setTimeout(() => answer(200)(req, res, n), 20) });
    const partners = await Promise.all(Array.from({ length: 4 }, () => stack.partnerWithWebhook(`${rx.url}/burst`)));
    const children = await Promise.all([dispatcherProcess(), dispatcherProcess()]);
    await eventually(async () => (await locksHeld()) === 2);

    let killing = true;
    let kills = 0;
    const killer = (async () => {
      for (let i = 0; killing; i++) {
        kills += await kill(i % 2 === 0 ? 'lock' : 'all');
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
    const ids: number[] = [];
    for (let i = 0; i < 80; i++) {
      ids.push(Number((await record(partners[i % partners.length].partner.id, i)).id));
      if (i % 10 === 9) await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 2000));
    killing = false;
    await killer;
    expect(kills).toBeGreaterThan(10);

    await eventually(async () => {
      const [r] = await driver<{ n: number }[]>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE event_id IN ${driver(ids)} AND state = 'delivered'`;
      return r.n === ids.length;
    }, 'every event delivered', 30_000, 100);
    await probeDelivered();
    const mine = rx.requests.map((r) => Number(r.headers['x-whiteboard-delivery'])).filter((id) => ids.includes(id));
    const perEvent = new Map<number, number>();
    for (const id of mine) perEvent.set(id, (perEvent.get(id) ?? 0) + 1);
    expect(new Set(mine)).toEqual(new Set(ids));
    expect(Math.max(...perEvent.values())).toBeLessThanOrEqual(2);
    const [logged] = await driver<{ n: number }[]>`SELECT count(*)::int AS n FROM webhook_attempts WHERE event_id IN ${driver(ids)}`;
    expect(logged.n).toBe(mine.length);
    for (const c of children) expect(c.child.exitCode, c.output()).toBeNull();
    await eventually(async () => (await locksHeld()) === 2);
    await Promise.all(children.map((c) => c.stop('SIGKILL')));
    await rx.close();
  }, 90_000);
});
