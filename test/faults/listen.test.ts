import postgres from 'postgres';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createSql } from '../../src/db/index.js';
import { retryWhileConnectionLost } from '../../src/db/errors.js';
import { listenSurely } from '../../src/db/listen.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { startProxy } from '../board/proxy.js';
import { eventually } from '../helpers/wait.js';

/**
 * A process's first LISTEN on a Postgres that drops the connection under it
 * (src/db/listen.ts) is retried: the start's await does not reject and the
 * process does not end. A proxy in front of Postgres resets the connection whenever a LISTEN
 * statement crosses it, as many times as the test says.
 */
const target = new URL(inject('databaseUrl'));

/** A Postgres URL through a proxy that resets the connection at the first `resets` LISTEN statements crossing it. */
async function resettingProxy(resets: number): Promise<{ url: string; resetsDone: () => number }> {
  let done = 0;
  const resetWhen = (chunk: Buffer) => {
    if (done >= resets || !chunk.includes('listen "')) return false;
    done++;
    return true;
  };
  const proxy = await startProxy(Number(target.port || 5432), { resetWhen });
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  return { url: url.toString(), resetsDone: () => done };
}

const notifier = postgres(target.toString(), { max: 1, onnotice: () => {} });
afterAll(() => notifier.end({ timeout: 1 }));

describe('the first LISTEN of a start, its connection reset', () => {
  it('two resets: it listens in the end, and each notification is handled once (not once per attempt), none after unlisten', async () => {
    const proxy = await resettingProxy(2);
    const sql = createSql(proxy.url, { max: 2 });
    const channel = `t_${randomBase62(8).toLowerCase()}`;
    const heard: string[] = [];
    let listens = 0;
    try {
      const handle = await listenSurely(sql, channel, (p) => heard.push(p), () => listens++);
      expect(proxy.resetsDone()).toBe(2);
      // told it listens (postgres.js may also have re-listened a failed attempt's listener before the retry replaced it)
      expect(listens).toBeGreaterThanOrEqual(1);
      await notifier`SELECT pg_notify(${channel}, 'one')`;
      await eventually(async () => heard.length >= 1, 'the notification');
      // postgres.js re-listens each failed attempt's listener on its own: were they not guarded, 'one' would arrive more than once.
      // Its listeners share one connection and are called together for each notification, which
      // arrive in the order sent: once a later one is heard, every copy of 'one' was.
      await notifier`SELECT pg_notify(${channel}, 'later')`;
      await eventually(async () => heard.includes('later'), 'the later notification');
      expect(heard).toEqual(['one', 'later']);
      await handle.unlisten();
      // after unlisten: a notification on another channel of the same connection, sent after 'two', is heard after it
      const other = `${channel}_other`;
      const heardOther: string[] = [];
      await sql.listen(other, (p) => heardOther.push(p));
      await notifier`SELECT pg_notify(${channel}, 'two')`;
      await notifier`SELECT pg_notify(${other}, 'after two')`;
      await eventually(async () => heardOther.length >= 1, 'the notification on the other channel');
      expect(heard).toEqual(['one', 'later']);
    } finally {
      await sql.end({ timeout: 1 });
    }
  }, 20_000);

  it('a start step that fails otherwise is not retried; a lost connection is, until the deadline', async () => {
    let calls = 0;
    const notLost = Object.assign(new Error('permission denied'), { code: '42501' });
    await expect(retryWhileConnectionLost(async () => (calls++, Promise.reject(notLost)), { what: 'x' })).rejects.toBe(notLost);
    expect(calls).toBe(1);
    calls = 0;
    const lost = Object.assign(new Error('reset'), { code: 'ECONNRESET' });
    await expect(retryWhileConnectionLost(async () => (calls++, Promise.reject(lost)), { what: 'x', retryMs: 1_000 })).rejects.toBe(lost);
    expect(calls).toBeGreaterThanOrEqual(2); // 250 ms, then 500 ms, then the next would pass the deadline
    expect(calls).toBeLessThanOrEqual(3);
  });
});
