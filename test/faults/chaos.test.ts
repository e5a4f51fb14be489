import { afterAll, describe, expect, it } from 'vitest';
import { freePort, PostgresServer } from '../../bench/chaos/cluster.js';
import { concurrentStart, lockKill, pgKills, pgRestart, type Result } from '../../bench/chaos/scenarios.js';

/**
 * The short scenarios of the fault suite (`npm run chaos -- --short`), each
 * against real processes (API, two gateways, dispatcher, an own
 * redis-server): no process exits, every event arrives, none more than twice,
 * and billing stays with the truth the clients measured.
 */
function expectHealthy(r: Result): void {
  expect(r.exits.filter((e) => e.expected === null), JSON.stringify(r.exits)).toEqual([]);
  // what a failure needs to be understood: the counts and the scenario's notes (kills, timings)
  expect(r.events.missing, JSON.stringify({ events: r.events, notes: r.notes })).toBe(0);
  expect(r.events.maxPerEvent).toBeLessThanOrEqual(2);
}

/**
 * The restart scenario's own Postgres server. Its initdb (seconds of CPU and disk) runs beside the
 * scenarios that check no timing of the clients (the lock kills, the concurrent start), never beside
 * the backend kills, whose billing is held against the clients' own clocks.
 */
let restartServer: Promise<PostgresServer> | undefined;
function ownPostgres(): Promise<PostgresServer> {
  restartServer ??= (async () => {
    const pg = new PostgresServer(await freePort());
    await pg.init();
    return pg;
  })();
  restartServer.catch(() => {}); // awaited (and its failure reported) by the restart scenario
  return restartServer;
}
afterAll(async () => {
  await (await restartServer?.catch(() => undefined))?.destroy();
});

/** What a billing failure needs to be understood: each lesson's distance from its truth window, and the scenario's notes. */
const billing = (r: Result) => JSON.stringify({ truth: r.truth, truthFromRequests: r.truthFromRequests, billed: r.billed, perLesson: r.perLesson, notes: r.notes });

describe('fault suite, short scenarios', () => {
  it('Postgres backends of every process killed every second for 8 s: no exit, events delivered, billing within 2 s of the truth', async () => {
    const r = await pgKills(1_000, 8_000, 4);
    expectHealthy(r);
    expect(r.notes.join()).toMatch(/[1-9]\d* backends terminated/);
    expect(r.events.expected).toBeGreaterThan(0);
    expect(r.maxOver, billing(r)).toBeLessThanOrEqual(2);
    expect(r.maxUnder, billing(r)).toBeGreaterThanOrEqual(-2);
  }, 150_000); // 26 s on a quiet machine, 66 s seen under load, plus up to 30 s waiting for events

  it('the dispatcher lock connection killed every 300 ms during a burst of 100 events: each delivered, at most twice', async () => {
    void ownPostgres();
    const r = await lockKill(100, 300);
    expectHealthy(r);
    expect(r.events.expected).toBe(100);
  }, 90_000);

  it('four processes started at once on a new database: all ready, none exits', async () => {
    const r = await concurrentStart();
    expectHealthy(r);
    expect(r.notes).toContain('4 of 4 processes became ready');
  }, 90_000);

  it('the whole Postgres server stopped as in a crash and started 3 s later, people in lessons: no exit, events delivered, billing within 2 s, new lessons joined after', async () => {
    const r = await pgRestart(3_000, 2, undefined, undefined, await ownPostgres());
    expectHealthy(r);
    expect(r.notes.join()).toMatch(/Postgres down \d/);
    expect(r.lessons).toBe(4); // 2 in progress through the restart, 2 made and joined after it
    expect(r.events.expected).toBeGreaterThan(0);
    expect(r.maxOver, billing(r)).toBeLessThanOrEqual(2);
    expect(r.maxUnder, billing(r)).toBeGreaterThanOrEqual(-2);
    // the API's reads during the outage: 503 or 200, never a 500
    expect(r.notes.join()).not.toMatch(/500: \d/);
  }, 120_000);
});
