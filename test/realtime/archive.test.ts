import { eventually } from '../helpers/wait.js';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApi } from '../helpers/api.js';
import { balanceOf } from '../helpers/factories.js';
import { eventsOf } from '../helpers/lessons.js';
import { join, TestClient } from './helpers/client.js';
import { lessonRow, lessonWithLinks, sessionsOf } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

const clock = new ManualClock(new Date('2026-04-01T08:00:00Z'));
const gw = await startTestGateway({ clock });
const { sql } = gw.deps;
const api = await startTestApi({ env: gw.env, clock });

describe('DELETE /lessons/{id} with people in the lesson', () => {
  it('closes their sockets with 4410, charges the session up to the deletion, ends it with lesson.ended, and refuses their links with 410', async () => {
    const f = await lessonWithLinks(sql);
    const ta = await f.link('a', { at: clock.now() });
    const tb = await f.link('b', { at: clock.now() });
    const a = await join(gw.wsUrl(ta));
    const b = await join(gw.wsUrl(tb));
    const startedAt = clock.now();
    clock.advance(83_400);
    const archivedAt = clock.now();
    const res = await api.request('DELETE', `/lessons/${f.lesson.id}`, { key: f.apiKey });
    expect(res.status).toBe(204);
    clock.advance(5_000); // time passing after the deletion is not charged
    expect(await a.waitClosed()).toBe(4410);
    expect(await b.waitClosed()).toBe(4410);
    expect(a.closeReason).toBe('lesson deleted');
    await gw.settle();

    const [s] = await sessionsOf(sql, f.lesson.id);
    expect(s).toMatchObject({ seconds: 83, ended_at: archivedAt });
    expect(await lessonRow(sql, f.lesson.id)).toMatchObject({ billed_seconds: 83, ended_at: archivedAt });
    const ended = await eventsOf(sql, f.partner.id, 'lesson.ended');
    expect(ended.map((e) => e.data)).toEqual([
      { lesson_id: f.lesson.id, external_id: f.lesson.external_id, started_at: startedAt.toISOString(), ended_at: archivedAt.toISOString(), minutes: 1, mode: 'full' },
    ]);

    const again = new TestClient(gw.wsUrl(ta));
    await expect(again.opened).rejects.toThrow(/410/);
    expect((await fetch(gw.httpUrl(`/embed/${tb}`))).status).toBe(410);
  });

  it('ends the running session of a lesson archived while no gateway heard it, on the next sweep', async () => {
    const f = await lessonWithLinks(sql);
    const a = await join(gw.wsUrl(await f.link('a', { at: clock.now() })));
    const b = await join(gw.wsUrl(await f.link('b', { at: clock.now() })));
    await gw.settle();
    clock.advance(30_000);
    // archived behind the gateway's back: no pg_notify
    await sql`UPDATE lessons SET archived_at = ${clock.now()} WHERE id = ${f.lesson.id}`;
    const archivedAt = clock.now();
    clock.advance(10_000);
    await gw.maintain();
    expect(await a.waitClosed()).toBe(4410);
    expect(await b.waitClosed()).toBe(4410);
    await gw.settle();
    const [s] = await sessionsOf(sql, f.lesson.id);
    expect(s).toMatchObject({ seconds: 30, ended_at: archivedAt });
    expect(await eventsOf(sql, f.partner.id, 'lesson.ended')).toHaveLength(1);
  });

  it('bills nothing past archived_at when someone left after a deletion the node had not heard of yet', async () => {
    const { f, clients: [a, b, c], archivedAt } = await deletedUnheard(['a', 'b', 'c']);
    clock.advance(2_000);
    await c.close(); // three to two: metering goes on
    await gw.settle();
    clock.advance(2_000);
    await b.close(); // two to one: the pause is charged at once, 4 s past the deletion
    await gw.settle();
    clock.advance(1_000);
    await endsAtTheDeletion(f, archivedAt, [a]);
  });

  it('bills nothing past archived_at through several pauses and resumes after a deletion the node had not heard of', async () => {
    const { f, tokens: [, tb], clients: [a, first], archivedAt } = await deletedUnheard(['a', 'b']);
    let b = first;
    // three pause-resume cycles inside one flush interval (the link is still in the node's cache)
    for (let i = 0; i < 3; i++) {
      clock.advance(1_000);
      await b.close(); // two to one: 1 s past the deletion metered, the pause's charge skipped
      await gw.settle();
      b = await join(gw.wsUrl(tb)); // back: metering resumes
      await gw.settle();
    }
    clock.advance(1_000);
    await endsAtTheDeletion(f, archivedAt, [a, b]);
  });
});

/** A lesson the people `names` have been in together for 30 s, then deleted behind the node's back (its notice missed). */
async function deletedUnheard(names: string[]) {
  const f = await lessonWithLinks(sql, { minutes: 100 });
  const tokens: string[] = [];
  const clients: TestClient[] = [];
  for (const name of names) {
    tokens.push(await f.link(name, { at: clock.now() }));
    // the node heard the link's issue (a cached link it looked up itself would expire within the 30 s below)
    await eventually(async () => gw.gateway.admission.cached(tokens.at(-1)!, { heard: true }), 'the link heard by the node');
    clients.push(await join(gw.wsUrl(tokens.at(-1)!)));
  }
  await gw.settle();
  clock.advance(30_000);
  const archivedAt = clock.now();
  await sql`UPDATE lessons SET archived_at = ${archivedAt} WHERE id = ${f.lesson.id}`;
  return { f, tokens, clients, archivedAt };
}

/** The next flush finds a deletion the node missed: the people still in are closed, and the lesson's 30 s up to it are all that is billed. */
async function endsAtTheDeletion(f: Awaited<ReturnType<typeof lessonWithLinks>>, archivedAt: Date, inside: TestClient[]) {
  await gw.maintain();
  for (const c of inside) expect(await c.waitClosed()).toBe(4410);
  await gw.settle();
  const [s] = await sessionsOf(sql, f.lesson.id);
  expect(s).toMatchObject({ seconds: 30, charged_seconds: 30, ended_at: archivedAt });
  expect((await lessonRow(sql, f.lesson.id)).billed_seconds).toBe(30);
  expect(await balanceOf(sql, f.partner.id)).toBe(6000 - 30);
}
