import { describe, expect, it } from 'vitest';
import { topUp } from '../../src/domain/ledger.js';
import { recordMeteredTime, recordMeteredTimeBatch } from '../../src/metering/charge.js';
import { endSession, ensureSessionStarted } from '../../src/metering/sessions.js';
import { getUsageReport } from '../../src/reports/usage.js';
import { startTestApi } from '../helpers/api.js';
import { ManualClock } from '../helpers/deps.js';
import { partnerFactory } from '../helpers/factories.js';
import { lessonFactory } from '../helpers/lessons.js';
import { msk, playTimeline } from './driver.js';

/**
 * The report rollups (migrations/004_reports.sql) are kept in step by triggers
 * in the transactions of charges, session ends and top-ups. These tests hold
 * them to a rebuild from their sources and to the live computation.
 */
const clock = new ManualClock(msk('2026-05-01T12:00:00'));
const api = await startTestApi({ clock });
const { sql } = api.deps;

async function rollupsOf(partnerId: string) {
  const usage = await sql`
    SELECT to_char(day, 'YYYY-MM-DD') AS day, lesson_id, item_head, seconds, charged_seconds
    FROM usage_lesson_daily WHERE partner_id = ${partnerId} ORDER BY day, lesson_id`;
  const calls = await sql`
    SELECT to_char(day, 'YYYY-MM-DD') AS day, calls, seconds, charged_seconds, cost_kopecks
    FROM calls_daily WHERE partner_id = ${partnerId} ORDER BY day`;
  return { usage: usage.map((r) => ({ ...r })), calls: calls.map((r) => ({ ...r })) };
}

describe('report rollups', () => {
  it('equal a rebuild from usage_daily, sessions and top-ups after charges, ends and top-ups', async () => {
    const q = await partnerFactory(sql, { minutes: 0, boardRatePercent: 30 });
    const a = await lessonFactory(sql, q.partner, { external_id: 'roll-a' });
    const b = await lessonFactory(sql, q.partner, { mode: 'board_only' });
    await playTimeline(sql, q.partner.id, {
      topups: [
        { at: msk('2026-04-01T08:00:00'), minutes: 100, rub: '990.10' },
        { at: msk('2026-04-02T12:00:00'), minutes: 30, rub: '0' },
      ],
      sessions: [
        { lessonId: a.id, start: msk('2026-04-01T09:00:00'), seconds: 1234 },
        { lessonId: b.id, start: msk('2026-04-01T23:50:00'), seconds: 1201 },
        { lessonId: a.id, start: msk('2026-04-02T11:59:00'), seconds: 333 },
        { lessonId: a.id, start: msk('2026-04-02T23:59:30'), seconds: 77 },
        { lessonId: b.id, start: msk('2026-04-03T10:00:00'), seconds: 600, running: true },
      ],
      tickSeconds: 37,
    });
    const live = await rollupsOf(q.partner.id);
    expect(live.usage.length).toBeGreaterThan(4);
    expect(live.calls.map((c) => c.calls)).toEqual([2, 2]); // the running session is not in it
    await sql`SELECT reports_rebuild_usage(${q.partner.id}), reports_rebuild_calls(${q.partner.id}, '-infinity')`;
    expect(await rollupsOf(q.partner.id)).toEqual(live);
  });

  it("equal a rebuild after the gateway's batch charges, across midnight and with ended sessions in the batch", async () => {
    const q = await partnerFactory(sql, { minutes: 100, boardRatePercent: 30 });
    const lessons = [await lessonFactory(sql, q.partner), await lessonFactory(sql, q.partner, { mode: 'board_only' }), await lessonFactory(sql, q.partner)];
    const t0 = msk('2026-04-05T23:55:00');
    const at = (s: number) => new Date(t0.getTime() + s * 1000);
    const ids: number[] = [];
    for (const l of lessons) ids.push((await ensureSessionStarted(sql, { lessonId: l.id, at: t0, people: 2 })).session.id);
    for (let k = 1; k <= 12; k++) {
      if (k === 6) await endSession(sql, { sessionId: ids[2], endedAt: at(5 * 60), at: at(10 * 60) });
      // the ended session keeps being reported (with more people): it takes nothing and moves no rollup
      await recordMeteredTimeBatch(sql, ids.map((sessionId) => ({ sessionId, cumulativeSeconds: k * 60, at: at(k * 60), people: 2 + k })));
    }
    const live = await rollupsOf(q.partner.id);
    expect(live.usage.map((u) => [u.day, u.seconds])).toEqual([
      ['2026-04-05', 300], ['2026-04-05', 300], ['2026-04-05', 300],
      ['2026-04-06', 420], ['2026-04-06', 420],
    ]);
    expect(live.calls).toEqual([{ day: '2026-04-05', calls: 1, seconds: 300, charged_seconds: 300, cost_kopecks: expect.any(Number) }]);
    await sql`SELECT reports_rebuild_usage(${q.partner.id}), reports_rebuild_calls(${q.partner.id}, '-infinity')`;
    expect(await rollupsOf(q.partner.id)).toEqual(live);
  });

  it('re-prices calls already ended when a top-up is dated at or before their start, in the totals as in the items', async () => {
    const q = await partnerFactory(sql, { minutes: 0 });
    const lesson = await lessonFactory(sql, q.partner);
    await playTimeline(sql, q.partner.id, {
      topups: [{ at: msk('2026-04-10T00:00:00'), minutes: 60, rub: '600' }], // 10 rub a minute
      sessions: [
        { lessonId: lesson.id, start: msk('2026-04-10T10:00:00'), seconds: 60 },
        { lessonId: lesson.id, start: msk('2026-04-11T10:00:00'), seconds: 120 },
      ],
    });
    const before = await api.request('GET', '/calls?from=2026-04-10&to=2026-04-11', { key: q.apiKey });
    expect([before.body.items.map((i: any) => i.cost_rub), before.body.total.cost_rub]).toEqual([[20, 10], 30]);
    // Free minutes dated between the two calls halve the price of the second one only.
    await topUp(sql, { partnerId: q.partner.id, minutes: 60, at: msk('2026-04-10T12:00:00') });
    const after = await api.request('GET', '/calls?from=2026-04-10&to=2026-04-11', { key: q.apiKey });
    expect([after.body.items.map((i: any) => i.cost_rub), after.body.total.cost_rub]).toEqual([[10, 10], 20]);
  });

  it('keeps the calls totals unchanged when a running session ends and moves into the rollup', async () => {
    const q = await partnerFactory(sql, { minutes: 0 });
    const lesson = await lessonFactory(sql, q.partner);
    const { sessionIds } = await playTimeline(sql, q.partner.id, {
      topups: [{ at: msk('2026-04-20T00:00:00'), minutes: 7, rub: '70.07' }],
      sessions: [{ lessonId: lesson.id, start: msk('2026-04-20T10:00:00'), seconds: 100, running: true }],
    });
    const running = await api.request('GET', '/calls?from=2026-04-20&to=2026-04-20', { key: q.apiKey });
    expect(running.body.items[0].going).toBe(true);
    await recordMeteredTime(sql, { sessionId: sessionIds[0], cumulativeSeconds: 100, at: msk('2026-04-20T10:01:40') }); // a replay: nothing new
    await endSession(sql, { sessionId: sessionIds[0], endedAt: msk('2026-04-20T10:01:40'), at: msk('2026-04-20T10:06:40') });
    const ended = await api.request('GET', '/calls?from=2026-04-20&to=2026-04-20', { key: q.apiKey });
    expect(ended.body.items[0].going).toBe(false);
    expect(ended.body.total).toEqual(running.body.total);
    expect(ended.body.total).toEqual({ count: 1, seconds: 100, charged_seconds: 100, cost_rub: 16.68 });
  });

  it("follows a change of a lesson's external_id", async () => {
    const q = await partnerFactory(sql);
    const lesson = await lessonFactory(sql, q.partner, { external_id: 'old-id' });
    await playTimeline(sql, q.partner.id, { sessions: [{ lessonId: lesson.id, start: msk('2026-04-25T10:00:00'), seconds: 30 }] });
    await sql`UPDATE lessons SET external_id = 'new-id' WHERE id = ${lesson.id}`;
    const res = await api.request('GET', '/usage?from=2026-04-25&to=2026-04-25', { key: q.apiKey });
    expect(res.body.items.map((i: any) => i.external_id)).toEqual(['new-id']);
  });

  it('returns the connection when a usage stream is stopped early', async () => {
    const q = await partnerFactory(sql);
    const lessons = await Promise.all(Array.from({ length: 3 }, () => lessonFactory(sql, q.partner)));
    // 70 days of usage: three batches of days, so a batch is in flight when the reader stops.
    await playTimeline(sql, q.partner.id, {
      sessions: Array.from({ length: 70 }, (_, d) => ({
        lessonId: lessons[d % 3].id,
        start: new Date(msk('2026-03-01T10:00:00').getTime() + d * 86_400_000),
        seconds: 10,
      })),
    });
    // The test pool has 5 connections: a leak per stopped stream would hang the 6th.
    for (let i = 0; i < 8; i++) {
      const report = await getUsageReport(sql, q.partner.id, { from: '2026-03-01', to: '2026-05-15' }, clock.now());
      for await (const day of report.days) {
        expect(day.items).toBe(1);
        break;
      }
    }
    const full = await getUsageReport(sql, q.partner.id, { from: '2026-03-01', to: '2026-05-15' }, clock.now());
    let days = 0;
    for await (const _ of full.days) days++;
    expect(days).toBe(70);
  });
});
