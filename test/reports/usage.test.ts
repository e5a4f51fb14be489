import { beforeAll, describe, expect, it } from 'vitest';
import { UsageItemSchema, UsageReportSchema } from '../../src/api/presenters/usage.js';
import { archiveLesson } from '../../src/domain/lessons.js';
import { apiError, startTestApi } from '../helpers/api.js';
import { ManualClock } from '../helpers/deps.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { lessonFactory } from '../helpers/lessons.js';
import { msk, playTimeline } from './driver.js';

const clock = new ManualClock(msk('2026-04-01T00:30:00')); // 31 March in UTC, 1 April in Moscow
const api = await startTestApi({ clock });
const { sql } = api.deps;
let p: PartnerFixture;
beforeAll(async () => {
  p = await partnerFactory(sql, { boardRatePercent: 30 });
});

const usage = (key: string, qs = '') => api.request('GET', `/usage${qs}`, { key });

describe('GET /usage', () => {
  it('answers one item per lesson per Moscow day with every field, and totals that are the sums', async () => {
    const q = await partnerFactory(sql, { boardRatePercent: 30 });
    const full = await lessonFactory(sql, q.partner, { external_id: 'u-full' });
    const board = await lessonFactory(sql, q.partner, { mode: 'board_only' });
    await playTimeline(sql, q.partner.id, {
      sessions: [
        { lessonId: full.id, start: msk('2026-03-05T10:00:00'), seconds: 600 },
        { lessonId: full.id, start: msk('2026-03-05T15:00:00'), seconds: 61 }, // same lesson, same day: one item
        { lessonId: board.id, start: msk('2026-03-05T11:00:00'), seconds: 1001 },
        { lessonId: full.id, start: msk('2026-03-06T09:00:00'), seconds: 30 },
      ],
    });
    const res = await usage(q.apiKey, '?from=2026-03-05&to=2026-03-06');
    expect(res.status).toBe(200);
    const day5 = [
      { lesson_id: full.id, external_id: 'u-full', mode: 'full', day: '2026-03-05', seconds: 661, charged_seconds: 661 },
      { lesson_id: board.id, external_id: null, mode: 'board_only', day: '2026-03-05', seconds: 1001, charged_seconds: 300 },
    ].sort((x, y) => (x.lesson_id < y.lesson_id ? -1 : 1)); // by day, then lesson id
    expect(res.body).toEqual({
      from: '2026-03-05',
      to: '2026-03-06',
      total_seconds: 661 + 1001 + 30,
      total_charged_seconds: 661 + 300 + 30,
      items: [...day5, { lesson_id: full.id, external_id: 'u-full', mode: 'full', day: '2026-03-06', seconds: 30, charged_seconds: 30 }],
    });
  });

  it('splits a session from 23:58 to 00:03 Moscow time into 120 s on the first day and 180 s on the second', async () => {
    const q = await partnerFactory(sql);
    const lesson = await lessonFactory(sql, q.partner);
    await playTimeline(sql, q.partner.id, { sessions: [{ lessonId: lesson.id, start: msk('2026-03-10T23:58:00'), seconds: 300 }] });
    const res = await usage(q.apiKey, '?from=2026-03-10&to=2026-03-11');
    expect(res.body.items.map((i: any) => [i.day, i.seconds, i.charged_seconds])).toEqual([
      ['2026-03-10', 120, 120],
      ['2026-03-11', 180, 180],
    ]);
    const first = await usage(q.apiKey, '?from=2026-03-10&to=2026-03-10');
    expect([first.body.total_seconds, first.body.total_charged_seconds]).toEqual([120, 120]);
  });

  it("never shows another partner's lessons, even on the same days", async () => {
    const mine = await partnerFactory(sql);
    const theirs = await partnerFactory(sql);
    const myLesson = await lessonFactory(sql, mine.partner);
    const theirLesson = await lessonFactory(sql, theirs.partner, { external_id: 'theirs' });
    await playTimeline(sql, mine.partner.id, { sessions: [{ lessonId: myLesson.id, start: msk('2026-03-12T10:00:00'), seconds: 60 }] });
    await playTimeline(sql, theirs.partner.id, { sessions: [{ lessonId: theirLesson.id, start: msk('2026-03-12T10:00:00'), seconds: 90 }] });
    const res = await usage(mine.apiKey, '?from=2026-03-01&to=2026-03-31');
    expect(res.body.items.map((i: any) => i.lesson_id)).toEqual([myLesson.id]);
    expect(res.body.total_seconds).toBe(60);
  });

  it('includes a running session up to its last charge', async () => {
    const q = await partnerFactory(sql);
    const lesson = await lessonFactory(sql, q.partner);
    await playTimeline(sql, q.partner.id, { sessions: [{ lessonId: lesson.id, start: msk('2026-03-31T23:50:00'), seconds: 1200, running: true }] });
    const res = await usage(q.apiKey);
    expect(res.body.items.map((i: any) => [i.day, i.seconds])).toEqual([['2026-03-31', 600], ['2026-04-01', 600]]);
  });

  it('keeps the time of archived lessons in the report', async () => {
    const q = await partnerFactory(sql);
    const lesson = await lessonFactory(sql, q.partner);
    await playTimeline(sql, q.partner.id, { sessions: [{ lessonId: lesson.id, start: msk('2026-03-20T10:00:00'), seconds: 120 }] });
    await archiveLesson(sql, q.partner.id, lesson.id, msk('2026-03-21T10:00:00'));
    const res = await usage(q.apiKey, '?from=2026-03-20&to=2026-03-20');
    expect(res.body.items).toHaveLength(1);
    expect(res.body.total_charged_seconds).toBe(120);
  });

  it('defaults to the last 30 Moscow days, today included, whatever the UTC date', async () => {
    const q = await partnerFactory(sql);
    const lesson = await lessonFactory(sql, q.partner);
    const other = await lessonFactory(sql, q.partner);
    await playTimeline(sql, q.partner.id, {
      sessions: [
        { lessonId: lesson.id, start: msk('2026-03-02T23:59:00'), seconds: 60 }, // 2 March: one day too old
        { lessonId: other.id, start: msk('2026-03-03T00:00:00'), seconds: 7 }, // 3 March: the first day
        { lessonId: lesson.id, start: msk('2026-04-01T00:10:00'), seconds: 5 }, // today in Moscow, yesterday in UTC
      ],
    });
    const res = await usage(q.apiKey);
    expect(res.status).toBe(200);
    expect([res.body.from, res.body.to]).toEqual(['2026-03-03', '2026-04-01']);
    expect(res.body.items.map((i: any) => [i.day, i.seconds])).toEqual([['2026-03-03', 7], ['2026-04-01', 5]]);
    const since = await usage(q.apiKey, '?from=2026-03-02');
    expect([since.body.from, since.body.to, since.body.total_seconds]).toEqual(['2026-03-02', '2026-04-01', 72]);
  });

  it('streams a JSON body that matches the documented schema, external ids of any characters included', async () => {
    const q = await partnerFactory(sql);
    const odd = await lessonFactory(sql, q.partner, { external_id: 'a,"b"\\c\n\u2028 ы' });
    const plain = await lessonFactory(sql, q.partner);
    await playTimeline(sql, q.partner.id, {
      sessions: [
        { lessonId: odd.id, start: msk('2026-03-07T10:00:00'), seconds: 15 },
        { lessonId: plain.id, start: msk('2026-03-07T11:00:00'), seconds: 20 },
        { lessonId: plain.id, start: msk('2026-03-08T11:00:00'), seconds: 25 },
      ],
    });
    const res = await usage(q.apiKey, '?from=2026-03-07&to=2026-03-08');
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const body = JSON.parse(res.text);
    const parsed = UsageReportSchema.strict().parse(body);
    for (const item of body.items) UsageItemSchema.strict().parse(item);
    // Items are rendered by Postgres (migrations/004_reports.sql): same keys, same order as the schema.
    expect(body.items.map((i: object) => Object.keys(i))).toEqual(body.items.map(() => Object.keys(UsageItemSchema.shape)));
    expect(Object.keys(body)).toEqual(Object.keys(UsageReportSchema.shape));
    expect(parsed.items.find((i) => i.lesson_id === odd.id)?.external_id).toBe('a,"b"\\c\n\u2028 ы');
    expect(parsed.items.map((i) => i.seconds)).toEqual(odd.id < plain.id ? [15, 20, 25] : [20, 15, 25]);
    expect([parsed.total_seconds, parsed.total_charged_seconds]).toEqual([60, 60]);
  });

  it('answers an empty report for a period without usage', async () => {
    const res = await usage(p.apiKey, '?from=2020-01-01&to=2020-12-31');
    expect(res.body).toEqual({ from: '2020-01-01', to: '2020-12-31', total_seconds: 0, total_charged_seconds: 0, items: [] });
  });

  it('answers 400 bad_range in the spec format for every invalid period', async () => {
    const cases: [string, string][] = [
      ['?from=2026-02-30&to=2026-03-01', 'from is not a valid date YYYY-MM-DD'],
      ['?from=2026-03-01&to=tomorrow', 'to is not a valid date YYYY-MM-DD'],
      ['?from=&to=2026-03-01', 'from is not a valid date YYYY-MM-DD'],
      ['?from=2026-03-02&to=2026-03-01', 'from is after to'],
      ['?from=2026-04-02', 'from is after today'],
      ['?from=2025-03-01&to=2026-03-01', 'the period is longer than one year'],
      ['?from=2025-04-01', 'the period is longer than one year'],
    ];
    for (const [qs, message] of cases) {
      const res = await usage(p.apiKey, qs);
      expect([qs, res.status, res.body]).toEqual([qs, 400, apiError('bad_range', message)]);
    }
    const toOnly = await usage(p.apiKey, '?to=2026-03-01');
    expect(toOnly.status).toBe(400);
    expect(toOnly.body.detail.code).toBe('bad_range');
    const twice = await usage(p.apiKey, '?from=2026-03-01&from=2026-03-02&to=2026-03-05');
    // a repeated day is a bad period (the spec's code), not a 422
    expect([twice.status, twice.body]).toEqual([400, apiError('bad_range', 'from is given more than once')]);
    const yearOk = await usage(p.apiKey, '?from=2025-04-02');
    expect([yearOk.status, yearOk.body.from, yearOk.body.to]).toEqual([200, '2025-04-02', '2026-04-01']);
  });

  it('answers 401 without a key', async () => {
    const res = await api.request('GET', '/usage');
    expect(res.status).toBe(401);
  });
});
