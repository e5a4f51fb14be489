import { describe, expect, it } from 'vitest';
import { ListenedSet, type Listened } from '../../src/db/listenedSet.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { fileDeps, ManualClock } from '../helpers/deps.js';
import { eventually } from '../helpers/wait.js';

/**
 * The set the gateway keeps by LISTEN (src/db/listenedSet.ts; revoked links and removals are
 * two of them, tested through their features), on its own channel of the real Postgres: what
 * the rules' read returns is the test's, so it can hold a read while a notice arrives, or fail it.
 */
const clock = new ManualClock(new Date('2026-03-02T10:00:00Z'));
const deps = fileDeps({ clock });

function setOn(channel: string, read: () => Promise<string[]>, max?: number) {
  const heard: string[] = [];
  const set = new ListenedSet<Listened>(deps, {
    channel,
    parse: (payload, now) => ({ key: payload, until: now + 60_000 }),
    read: async (now) => (await read()).map((key) => ({ key, until: now.getTime() + 60_000 })),
    max,
  });
  return { set, heard, start: () => set.start((e) => heard.push(e.key)) };
}

/** Cuts this channel's LISTEN connection: postgres.js listens again on a new one, and the set is read again. */
async function cutListen(channel: string): Promise<void> {
  await deps.sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = current_database() AND query = ${`listen "${channel}"`}`;
}

describe('a set kept by LISTEN', () => {
  it('keeps a notice heard while the set is read again after a reconnect, and hands on what the read found', async () => {
    const channel = `t_${randomBase62(8).toLowerCase()}`;
    let release: (() => void) | undefined;
    let reads = 0;
    const { set, heard, start } = setOn(channel, async () => {
      reads++;
      if (reads === 1) return ['before'];
      await new Promise<void>((r) => (release = r));
      return ['missed'];
    });
    await start();
    await set.known();
    expect(set.has('before')).toBe(true);
    await cutListen(channel);
    await eventually(async () => release, 'the read after the reconnect');
    await deps.sql`SELECT pg_notify(${channel}, 'meanwhile')`;
    await eventually(async () => set.has('meanwhile'), 'the notice');
    release!();
    await set.known();
    expect(['before', 'meanwhile', 'missed'].map((k) => set.has(k))).toEqual([true, true, true]);
    expect(heard).toEqual(expect.arrayContaining(['before', 'meanwhile', 'missed']));
    await set.stop();
  });

  it('a failed read fails the check that waits for it, and the next check reads again', async () => {
    const channel = `t_${randomBase62(8).toLowerCase()}`;
    let fail = true;
    const { set, start } = setOn(channel, async () => {
      if (fail) throw new Error('the read failed');
      return ['read'];
    });
    await start();
    await expect(set.known()).rejects.toThrow('the read failed');
    fail = false;
    await set.known();
    expect(set.has('read')).toBe(true);
    await set.stop();
  });

  it('stays within its bound: the expired go first, then the oldest', async () => {
    const { set, start } = setOn(`t_${randomBase62(8).toLowerCase()}`, async () => [], 3);
    await start();
    await set.known();
    const now = clock.now().getTime();
    set.add({ key: 'expired', until: now + 1000 });
    set.add({ key: 'oldest', until: now + 60_000 });
    set.add({ key: 'b', until: now + 60_000 });
    clock.advance(2000);
    set.add({ key: 'c', until: now + 60_000 });
    expect(['expired', 'oldest', 'b', 'c'].map((k) => set.has(k))).toEqual([false, true, true, true]);
    set.add({ key: 'd', until: now + 60_000 });
    expect(['oldest', 'b', 'c', 'd'].map((k) => set.has(k))).toEqual([false, true, true, true]);
    await set.stop();
  });
});
