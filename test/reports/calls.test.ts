import { beforeAll, describe, expect, it } from 'vitest';
import { startTestApi } from '../helpers/api.js';
import { ManualClock } from '../helpers/deps.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { lessonFactory } from '../helpers/lessons.js';
import { msk, playTimeline } from './driver.js';

const clock = new ManualClock(msk('2026-04-01T12:00:00'));
const api = await startTestApi({ clock });
const { sql } = api.deps;
let p: PartnerFixture;
beforeAll(async () => {
  p = await partnerFactory(sql);
});

const calls = (key: string, qs = '') => api.request('GET', `/calls${qs}`, { key });
/** A partner without the factory's top-up, so each test sets the price of minutes itself. */
const unpaidPartner = (boardRatePercent = 30) => partnerFactory(sql, { minutes: 0, boardRatePercent });

describe('GET /calls', () => {
  it('lists sessions newest first with every field of the spec', async () => {
    const q = await unpaidPartner();
    const lesson = await lessonFactory(sql, q.partner, { title: 'Geometry', external_id: 'c-1' });
    const board = await lessonFactory(sql, q.partner, { title: 'Board', mode: 'board_only' });
    const { sessionIds } = await playTimeline(sql, q.partner.id, {
      topups: [{ at: msk('2026-03-01T00:00:00'), minutes: 100, rub: '1000.00' }], // 10 rub a minute
      sessions: [
        { lessonId: lesson.id, start: msk('2026-03-15T10:00:00'), seconds: 90, people: [2, 5, 3] },
        { lessonId: board.id, start: msk('2026-03-15T11:00:00'), seconds: 1000 },
        { lessonId: lesson.id, start: msk('2026-03-16T09:00:00'), seconds: 125, running: true, people: [3] },
      ],
      tickSeconds: 30,
    });
    const res = await calls(q.apiKey, '?from=2026-03-15&to=2026-03-16');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      from: '2026-03-15',
      to: '2026-03-16',
      total: { count: 3, seconds: 1215, charged_seconds: 90 + 300 + 125, cost_rub: 15 + 50 + 20.83 },
      items: [
        {
          id: String(sessionIds[2]), lesson_id: lesson.id, title: 'Geometry', external_id: 'c-1', mode: 'full',
          started_at: '2026-03-16T06:00:00.000Z', ended_at: null, going: true,
          seconds: 125, charged_seconds: 125, cost_rub: 20.83, people: 3,
        },
        {
          id: String(sessionIds[1]), lesson_id: board.id, title: 'Board', external_id: null, mode: 'board_only',
          started_at: '2026-03-15T08:00:00.000Z', ended_at: '2026-03-15T08:16:40.000Z', going: false,
          seconds: 1000, charged_seconds: 300, cost_rub: 50, people: 2,
        },
        {
          id: String(sessionIds[0]), lesson_id: lesson.id, title: 'Geometry', external_id: 'c-1', mode: 'full',
          started_at: '2026-03-15T07:00:00.000Z', ended_at: '2026-03-15T07:01:30.000Z', going: false,
          seconds: 90, charged_seconds: 90, cost_rub: 15, people: 5,
        },
      ],
    });
  });

  it('lists a session from 23:58 to 00:03 Moscow time once, on the day it started', async () => {
    const q = await partnerFactory(sql);
    const lesson = await lessonFactory(sql, q.partner);
    await playTimeline(sql, q.partner.id, { sessions: [{ lessonId: lesson.id, start: msk('2026-03-10T23:58:00'), seconds: 300 }] });
    const both = await calls(q.apiKey, '?from=2026-03-10&to=2026-03-11');
    expect(both.body.items.map((i: any) => [i.started_at, i.seconds])).toEqual([['2026-03-10T20:58:00.000Z', 300]]);
    const first = await calls(q.apiKey, '?from=2026-03-10&to=2026-03-10');
    expect(first.body.total).toMatchObject({ count: 1, seconds: 300, charged_seconds: 300 });
    const second = await calls(q.apiKey, '?from=2026-03-11&to=2026-03-11');
    expect(second.body.total).toMatchObject({ count: 0, seconds: 0, charged_seconds: 0 });
    expect(second.body.items).toEqual([]);
  });

  it('selects calls by the Moscow day they started, not the UTC day', async () => {
    const q = await partnerFactory(sql);
    const lesson = await lessonFactory(sql, q.partner);
    // 00:30 on 11 March in Moscow is still 10 March in UTC.
    await playTimeline(sql, q.partner.id, { sessions: [{ lessonId: lesson.id, start: msk('2026-03-11T00:30:00'), seconds: 60 }] });
    const day10 = await calls(q.apiKey, '?from=2026-03-10&to=2026-03-10');
    const day11 = await calls(q.apiKey, '?from=2026-03-11&to=2026-03-11');
    expect([day10.body.total.count, day11.body.total.count]).toEqual([0, 1]);
    expect(day11.body.items[0].started_at).toBe('2026-03-10T21:30:00.000Z');
  });

  it("never shows another partner's sessions", async () => {
    const mine = await partnerFactory(sql);
    const theirs = await partnerFactory(sql);
    const myLesson = await lessonFactory(sql, mine.partner);
    const theirLesson = await lessonFactory(sql, theirs.partner);
    await playTimeline(sql, theirs.partner.id, { sessions: [{ lessonId: theirLesson.id, start: msk('2026-03-12T10:00:00'), seconds: 90 }] });
    await playTimeline(sql, mine.partner.id, { sessions: [{ lessonId: myLesson.id, start: msk('2026-03-12T10:00:00'), seconds: 60 }] });
    const res = await calls(mine.apiKey, '?from=2026-03-01&to=2026-03-31');
    expect(res.body.items.map((i: any) => i.lesson_id)).toEqual([myLesson.id]);
    expect(res.body.total).toMatchObject({ count: 1, seconds: 60 });
  });

  it('prices each call at the average price of minutes at its start: paid over received, free minutes included', async () => {
    const q = await unpaidPartner();
    const [lesson, other] = [await lessonFactory(sql, q.partner), await lessonFactory(sql, q.partner)];
    await playTimeline(sql, q.partner.id, {
      topups: [
        { at: msk('2026-03-02T10:00:00'), minutes: 60, rub: '600' }, // 10 rub a minute
        { at: msk('2026-03-03T10:00:00'), minutes: 60, rub: '0' }, // free minutes: now 600 / 120 = 5 rub a minute
      ],
      sessions: [
        { lessonId: lesson.id, start: msk('2026-03-01T10:00:00'), seconds: 60 }, // before any minute was received: 0
        { lessonId: lesson.id, start: msk('2026-03-02T09:59:00'), seconds: 120 }, // price at start, not at the later top-up: 0
        { lessonId: other.id, start: msk('2026-03-02T10:00:00'), seconds: 60 }, // a top-up at the same instant counts: 10
        { lessonId: lesson.id, start: msk('2026-03-03T09:59:00'), seconds: 120 }, // still 10 rub a minute: 20
        { lessonId: other.id, start: msk('2026-03-03T12:00:00'), seconds: 60 }, // 5
      ],
    });
    const res = await calls(q.apiKey, '?from=2026-03-01&to=2026-03-03');
    expect(res.body.items.map((i: any) => i.cost_rub)).toEqual([5, 20, 10, 0, 0]);
    expect(res.body.total.cost_rub).toBe(35);
  });

  it('rounds each cost half up to the kopeck and totals the rounded lines without float drift', async () => {
    const q = await unpaidPartner(30);
    const lesson = await lessonFactory(sql, q.partner);
    const board = await lessonFactory(sql, q.partner, { mode: 'board_only' });
    await playTimeline(sql, q.partner.id, {
      // 1 rub for 120 s: 5/6 of a kopeck per second
      topups: [{ at: msk('2026-03-01T00:00:00'), minutes: 2, rub: '1' }],
      sessions: [
        { lessonId: lesson.id, start: msk('2026-03-05T10:00:00'), seconds: 3 }, // 2.5 kopecks -> 0.03
        { lessonId: lesson.id, start: msk('2026-03-05T11:00:00'), seconds: 3 }, // 0.03 again: total 0.06, not round(5 kopecks)
        { lessonId: lesson.id, start: msk('2026-03-05T12:00:00'), seconds: 1 }, // 0.8333 kopecks -> 0.01
        { lessonId: board.id, start: msk('2026-03-05T13:00:00'), seconds: 13 }, // charged floor(3.9) = 3 s -> 0.03
      ],
    });
    const res = await calls(q.apiKey, '?from=2026-03-05&to=2026-03-05');
    expect(res.body.items.map((i: any) => [i.charged_seconds, i.cost_rub])).toEqual([[3, 0.03], [1, 0.01], [3, 0.03], [3, 0.03]]);
    expect(res.body.total.cost_rub).toBe(0.1);

    // 0.1 + 0.2 is 0.30000000000000004 in floats; kopecks add exactly.
    const r = await unpaidPartner();
    const l2 = await lessonFactory(sql, r.partner);
    await playTimeline(sql, r.partner.id, {
      topups: [{ at: msk('2026-03-01T00:00:00'), minutes: 60, rub: '6' }], // 10 kopecks a minute
      sessions: [
        { lessonId: l2.id, start: msk('2026-03-06T10:00:00'), seconds: 60 },
        { lessonId: l2.id, start: msk('2026-03-06T11:00:00'), seconds: 120 },
      ],
    });
    const r2 = await calls(r.apiKey, '?from=2026-03-06&to=2026-03-06');
    expect(r2.body.items.map((i: any) => i.cost_rub)).toEqual([0.2, 0.1]);
    expect(r2.body.total.cost_rub).toBe(0.3);
    expect(r2.text).toContain('"cost_rub":0.3}');
  });

  it('pages with limit and offset in a stable order, with totals over the whole period on every page', async () => {
    const q = await partnerFactory(sql);
    const lessons = await Promise.all(Array.from({ length: 7 }, () => lessonFactory(sql, q.partner)));
    // Two pairs start at the same instant: the id breaks the tie.
    const starts = ['T10:00:00', 'T10:00:00', 'T11:00:00', 'T12:00:00', 'T12:00:00', 'T13:00:00', 'T14:00:00'];
    const { sessionIds } = await playTimeline(sql, q.partner.id, {
      sessions: lessons.map((l, i) => ({ lessonId: l.id, start: msk(`2026-03-20${starts[i]}`), seconds: 60 + i })),
    });
    const seen: string[] = [];
    for (let offset = 0; offset < 9; offset += 3) {
      const page = await calls(q.apiKey, `?from=2026-03-20&to=2026-03-20&limit=3&offset=${offset}`);
      expect(page.body.total).toEqual({ count: 7, seconds: 7 * 60 + 21, charged_seconds: 7 * 60 + 21, cost_rub: 0 });
      seen.push(...page.body.items.map((i: any) => i.id));
    }
    expect(seen).toEqual([6, 5, 4, 3, 2, 1, 0].map((i) => String(sessionIds[i])));
    const beyond = await calls(q.apiKey, '?from=2026-03-20&to=2026-03-20&offset=1000');
    expect([beyond.status, beyond.body.items, beyond.body.total.count]).toEqual([200, [], 7]);
  });

  it('defaults to 100 calls a page, accepts up to 1000, and answers 422 naming limit or offset out of bounds', async () => {
    const q = await partnerFactory(sql);
    const lessons = await Promise.all(Array.from({ length: 101 }, () => lessonFactory(sql, q.partner)));
    // A plain fixture: paging needs many sessions, not their charges.
    await sql`
      INSERT INTO sessions (lesson_id, partner_id, mode, rate_percent, started_at, ended_at)
      SELECT l.id, l.partner_id, 'full', 100, ${msk('2026-03-25T10:00:00')}, ${msk('2026-03-25T11:00:00')}
      FROM lessons l WHERE l.id = ANY(${lessons.map((l) => l.id)})`;
    const def = await calls(q.apiKey);
    expect([def.status, def.body.items.length, def.body.total.count]).toEqual([200, 100, 101]);
    const max = await calls(q.apiKey, '?from=2026-03-25&limit=1000');
    expect(max.body.items).toHaveLength(101);
    for (const [qs, field] of [
      ['limit=0', 'limit'], ['limit=1001', 'limit'], ['limit=-1', 'limit'], ['limit=1.5', 'limit'], ['limit=ten', 'limit'], ['limit=', 'limit'],
      ['offset=-1', 'offset'], ['offset=1000001', 'offset'], ['offset=2.5', 'offset'], ['offset=', 'offset'], ['offset=%20', 'offset'], ['offset=1e3', 'offset'], ['offset=0x10', 'offset'],
    ]) {
      const res = await calls(q.apiKey, `?${qs}`);
      expect([qs, res.status, res.body.detail.map((d: any) => d.loc)]).toEqual([qs, 422, [['query', field]]]);
    }
    const okEdges = await calls(q.apiKey, '?limit=1&offset=1000000');
    expect(okEdges.status).toBe(200);
  });

  it('answers 400 bad_range for an invalid period, as /usage does', async () => {
    for (const qs of ['?from=2026-02-30&to=2026-03-01', '?from=2026-03-02&to=2026-03-01', '?from=2025-01-01&to=2026-01-01', '?to=2026-03-01', '?from=2026-04-02']) {
      const res = await calls(p.apiKey, qs);
      expect([qs, res.status, res.body.detail.code]).toEqual([qs, 400, 'bad_range']);
    }
  });
});
