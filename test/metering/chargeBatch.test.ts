import { describe, expect, it } from 'vitest';
import { recordMeteredTime } from '../../src/metering/charge.js';
import { recordMeteredTimeBatch } from '../../src/metering/charge.js';
import { endSession, ensureSessionStarted } from '../../src/metering/sessions.js';
import { fileDeps, makeDeps, secondsAfter } from '../helpers/deps.js';
import { balanceOf, partnerFactory } from '../helpers/factories.js';
import { eventsOf, lessonFactory } from '../helpers/lessons.js';

const deps = fileDeps();
const { sql } = deps;

const T0 = new Date('2026-03-12T10:00:00Z');
const at = secondsAfter(T0);

async function sessionIn(partner: Awaited<ReturnType<typeof partnerFactory>>['partner'], mode?: 'full' | 'board_only', start = T0) {
  const lesson = await lessonFactory(sql, partner, { mode });
  const { session } = await ensureSessionStarted(sql, { lessonId: lesson.id, at: start, people: 2 });
  return { lesson, session };
}

describe('recordMeteredTimeBatch', () => {
  it('charges many sessions in one call exactly as the same calls one by one would', async () => {
    const { partner } = await partnerFactory(sql, { minutes: 100, boardRatePercent: 30 });
    const a = await sessionIn(partner);
    const b = await sessionIn(partner, 'board_only');
    const night = new Date('2026-03-12T20:58:00Z'); // 23:58 Moscow
    const c = await sessionIn(partner, 'full', night);
    for (let i = 1; i <= 7; i++) {
      await recordMeteredTimeBatch(sql, [
        { sessionId: a.session.id, cumulativeSeconds: i * 10, at: at(i * 10), people: 3 },
        { sessionId: b.session.id, cumulativeSeconds: i, at: at(i) },
      ]);
    }
    await recordMeteredTimeBatch(sql, [{ sessionId: c.session.id, cumulativeSeconds: 300, at: new Date(night.getTime() + 300_000) }]);
    const rows = await sql`SELECT id, seconds, charged_seconds, people_max FROM sessions WHERE id IN (${a.session.id}, ${b.session.id}, ${c.session.id}) ORDER BY id`;
    expect(rows.map((r) => ({ ...r }))).toEqual([
      { id: a.session.id, seconds: 70, charged_seconds: 70, people_max: 3 },
      { id: b.session.id, seconds: 7, charged_seconds: 2, people_max: 2 },
      { id: c.session.id, seconds: 300, charged_seconds: 300, people_max: 2 },
    ]);
    const days = await sql`SELECT to_char(day, 'YYYY-MM-DD') AS day, seconds FROM usage_daily WHERE session_id = ${c.session.id} ORDER BY day`;
    expect(days.map((r) => ({ ...r }))).toEqual([{ day: '2026-03-12', seconds: 120 }, { day: '2026-03-13', seconds: 180 }]);
    expect(await balanceOf(sql, partner.id)).toBe(6000 - 70 - 2 - 300);
    const billed = await sql`SELECT id, billed_seconds FROM lessons_billed WHERE id IN (${a.lesson.id}, ${b.lesson.id}) ORDER BY id`;
    expect(Object.fromEntries(billed.map((r) => [r.id, r.billed_seconds]))).toEqual({ [a.lesson.id]: 70, [b.lesson.id]: 7 });
  });

  it('is a watermark: replays, lower totals, duplicates within a batch and ended sessions charge nothing', async () => {
    const { partner } = await partnerFactory(sql, { minutes: 100 });
    const a = await sessionIn(partner);
    const b = await sessionIn(partner);
    await recordMeteredTime(sql, { sessionId: a.session.id, cumulativeSeconds: 50, at: at(50) });
    await endSession(sql, { sessionId: b.session.id, endedAt: at(1), at: at(2) });
    const r = await recordMeteredTimeBatch(sql, [
      { sessionId: a.session.id, cumulativeSeconds: 40, at: at(40) },
      { sessionId: a.session.id, cumulativeSeconds: 60, at: at(60) },
      { sessionId: a.session.id, cumulativeSeconds: 55, at: at(55) },
      { sessionId: b.session.id, cumulativeSeconds: 100, at: at(100) },
    ]);
    expect(r).toEqual({ seconds: 10, charged: 10 });
    await recordMeteredTimeBatch(sql, [{ sessionId: a.session.id, cumulativeSeconds: 60, at: at(60) }]);
    expect(await balanceOf(sql, partner.id)).toBe(6000 - 60);
  });

  it('records balance.low and balance.exhausted once per crossing on the batch total', async () => {
    const { partner } = await partnerFactory(sql, { minutes: 61 });
    const a = await sessionIn(partner);
    const b = await sessionIn(partner);
    await recordMeteredTimeBatch(sql, [
      { sessionId: a.session.id, cumulativeSeconds: 1900, at: at(1900) },
      { sessionId: b.session.id, cumulativeSeconds: 1900, at: at(1900) },
    ]);
    await recordMeteredTimeBatch(sql, [{ sessionId: a.session.id, cumulativeSeconds: 2000, at: at(2000) }]);
    expect((await eventsOf(sql, partner.id, 'balance.low')).map((e) => e.data)).toEqual([{ balance_seconds: 3660 - 3800, balance_minutes: -2 }]);
    expect(await eventsOf(sql, partner.id, 'balance.exhausted')).toHaveLength(1);
  });

  it('runs concurrently with single charges and other batches of the same partner without deadlocks', async () => {
    const { partner } = await partnerFactory(sql, { minutes: 1000 });
    const all = await Promise.all(Array.from({ length: 10 }, () => sessionIn(partner)));
    const pool = makeDeps({ env: { DATABASE_POOL_SIZE: '10' } });
    try {
      for (let round = 1; round <= 5; round++) {
        const items = all.map(({ session }) => ({ sessionId: session.id, cumulativeSeconds: round * 10, at: at(round * 10) }));
        await Promise.all([
          recordMeteredTimeBatch(pool.sql, items),
          recordMeteredTimeBatch(pool.sql, [...items].reverse()),
          ...items.slice(0, 4).map((i) => recordMeteredTime(pool.sql, i)),
        ]);
      }
    } finally {
      await pool.close();
    }
    expect(await balanceOf(sql, partner.id)).toBe(60_000 - 10 * 50);
  });
});
