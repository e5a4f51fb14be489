import { expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { renewMs } from '../../src/metering/rules.js';
import { join } from './helpers/client.js';
import { lessonRow, lessonWithLinks, sessionsOf } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';
import { isolatedEnv } from '../helpers/isolation.js';

/**
 * A dead node's people are billed until its
 * next lease renewal was due (it was alive at the last one), not until its
 * lease expired or another node noticed, even though the surviving node keeps
 * flushing the lesson meanwhile. Two in-process gateways on one ManualClock;
 * "dead" is a node that stops renewing (its maintenance no longer runs).
 */
const clock = new ManualClock(new Date('2026-04-06T08:00:00Z'));
const env = await isolatedEnv();
const n1 = await startTestGateway({ env, clock });
const n2 = await startTestGateway({ env, clock });
const { sql } = n1.deps;

it('bills the people of a node that stopped renewing until its missed renewal, although the other node flushed the lesson in between', async () => {
  const f = await lessonWithLinks(sql, { minutes: 100 });
  const a = await join(n1.wsUrl(await f.link('a', { at: clock.now() })));
  const b = await join(n2.wsUrl(await f.link('b', { at: clock.now() })));
  await Promise.all([n1.settle(), n2.settle()]);
  const nodes = [n1, n2];
  const step = async (alive: typeof nodes) => {
    clock.advance(3000);
    for (const n of alive) await n.maintenance.guard('heartbeat', () => n.maintenance.heartbeat());
    for (const n of alive) await n.maintenance.guard('flush', () => n.maintenance.flush());
    await Promise.all(alive.map((n) => n.settle()));
  };
  for (let i = 0; i < 3; i++) await step(nodes); // both renew at +3, +6, +9 s
  for (let i = 0; i < 5; i++) await step([n1]); // n2 is dead from +9 s; its lease (10 s) runs out at +19 s, n1 reaps it at +21 s
  const billed = (await lessonRow(sql, f.lesson.id)).billed_seconds;
  expect(billed).toBe(Math.floor((9000 + renewMs(10_000)) / 1000)); // 12 s: +9 s and one renewal interval
  expect((await sessionsOf(sql, f.lesson.id))[0].seconds).toBe(billed);
  await a.close();
  await b.close();
});
