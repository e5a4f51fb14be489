import type { Sql, Tx } from '../db/index.js';
import { recordEvent } from '../events/outbox.js';
import { BALANCE_LOW_SECONDS, secondsToWholeMinutes } from '../domain/ledger.js';
import { splitByMoscowDay, type DaySlice } from './moscow.js';
import type { Session } from './sessions.js';

/** Cumulative charge of `seconds` metered seconds: the floor is taken once over the whole session. */
export function chargedFor(seconds: number, ratePercent: number): number {
  return Math.floor((seconds * ratePercent) / 100);
}

export interface MeteredItem {
  sessionId: number;
  /** cumulative metered seconds of the session reached at `at` (a watermark) */
  cumulativeSeconds: number;
  at: Date;
  people?: number;
  /**
   * Not charged when the session's lesson was deleted before `at` (a pause the gateway applied
   * before it noticed a deletion whose notice it missed): the deletion's end charges the session
   * up to archived_at instead (realtime/presence/MeterMachine.ts cutAfter). Never set on an end.
   */
  unlessArchived?: boolean;
}

/** What a charge reads of a session row. */
type ChargedSession = Pick<Session, 'id' | 'lesson_id' | 'partner_id' | 'mode' | 'rate_percent' | 'seconds' | 'people_max'> & { ended: boolean };

export interface ChargeResult {
  /** metered seconds newly recorded (0 when everything was a replay) */
  seconds: number;
  /** balance seconds newly deducted */
  charged: number;
}

/**
 * Records that session `sessionId` has been metered up to `cumulativeSeconds`,
 * the total reached at instant `at`: a batch of one (recordMeteredTimeBatch
 * holds the only implementation of charging).
 */
export async function recordMeteredTime(sql: Sql, item: MeteredItem): Promise<ChargeResult> {
  return recordMeteredTimeBatch(sql, [item]);
}

/**
 * Records metered time for many sessions in one transaction (the gateway's
 * periodic flush of every running lesson costs one commit, not one per lesson).
 *
 * Each item is a watermark, not an increment: replaying it, or two gateway
 * nodes reporting the same total, charges nothing twice (only a higher total
 * moves anything; ended sessions take nothing). Contract for the caller:
 * metering between two reports is continuous (report at every pause, at the
 * end, and periodically), so the new seconds are exactly the ones in
 * (at - delta, at]; they are split at Moscow midnight to the second.
 *
 * In one transaction: sessions.seconds/charged_seconds (the charge floored
 * once over the whole session, so no drift per tick), usage_daily per Moscow
 * day, partners.balance_seconds, and balance.low / balance.exhausted when a
 * partner's balance crosses their lines while armed (decided on each partner's
 * total deduction of the batch: once per crossing). A lesson's billed_seconds
 * is the sum of its sessions' seconds, read with the lesson (view
 * lessons_billed, migration 012), so the charge neither locks nor updates the
 * lesson row: two of the five row operations per lesson and flush.
 *
 * Locks: every session (sorted), then every partner (sorted), both FOR NO KEY
 * UPDATE. Starts and ends lock the lesson, then the session, then the partner
 * (lockLessonOfSession); a charge, which never asks for a lesson, cannot close
 * a cycle with them, and concurrent charges from several nodes take the same
 * order, so none deadlocks (test/metering/charge.test.ts, "concurrency").
 */
export async function recordMeteredTimeBatch(sql: Sql, items: MeteredItem[]): Promise<ChargeResult> {
  for (const i of items) {
    if (!Number.isInteger(i.cumulativeSeconds) || i.cumulativeSeconds < 0) throw new Error('cumulativeSeconds must be a non-negative integer');
  }
  // the highest report per session wins within a batch, as it would in sequence
  const bySession = new Map<number, MeteredItem>();
  for (const i of items) {
    const prev = bySession.get(i.sessionId);
    const top = !prev || i.cumulativeSeconds > prev.cumulativeSeconds ? i : prev;
    bySession.set(i.sessionId, { ...top, people: Math.max(i.people ?? 0, prev?.people ?? 0) || undefined });
  }
  const ids = [...bySession.keys()].sort((a, b) => a - b);
  if (ids.length === 0) return { seconds: 0, charged: 0 };

  return sql.begin(async (tx) => {
    // the columns the charge reads (no timestamps to parse: the periodic flush charges every running session)
    const sessions = await tx<ChargedSession[]>`
      SELECT id, lesson_id, partner_id, mode, rate_percent, ended_at IS NOT NULL AS ended, seconds, people_max
      FROM sessions WHERE id = ANY(${ids}::bigint[]) ORDER BY id FOR NO KEY UPDATE`;

    const peopleRows = sessions.filter((s) => (bySession.get(s.id)!.people ?? 0) > s.people_max);
    if (peopleRows.length > 0) {
      await tx`
        UPDATE sessions s SET people_max = x.p
        FROM unnest(${peopleRows.map((s) => s.id)}::bigint[], ${peopleRows.map((s) => bySession.get(s.id)!.people!)}::int[]) AS x(id, p)
        WHERE s.id = x.id`;
    }
    // items past their lesson's deletion, where asked (unlessArchived): only pauses ask, so a flush
    // costs no lesson read
    const asking = sessions.filter((s) => bySession.get(s.id)!.unlessArchived).map((s) => s.id);
    const pastDeletion = new Set<number>();
    if (asking.length > 0) {
      const rows = await tx<{ id: number; archived_at: Date }[]>`
        SELECT s.id, l.archived_at FROM sessions s JOIN lessons l ON l.id = s.lesson_id
        WHERE s.id = ANY(${asking}::bigint[]) AND l.archived_at IS NOT NULL`;
      for (const r of rows) if (r.archived_at.getTime() < bySession.get(Number(r.id))!.at.getTime()) pastDeletion.add(Number(r.id));
    }
    const moving = sessions.filter((s) => !s.ended && !pastDeletion.has(s.id) && bySession.get(s.id)!.cumulativeSeconds > s.seconds);
    if (moving.length === 0) return { seconds: 0, charged: 0 };

    // Moscow days: one query says, for every item, the day its last second fell
    // in and that day's midnight; only an item reaching back over a midnight
    // takes the slice-by-slice path.
    const ends = moving.map((s) => bySession.get(s.id)!.at);
    const days = await tx<{ n: number; day: string; midnight: Date }[]>`
      SELECT n::int, to_char((t - interval '1 microsecond') AT TIME ZONE 'Europe/Moscow', 'YYYY-MM-DD') AS day,
             date_trunc('day', (t - interval '1 microsecond') AT TIME ZONE 'Europe/Moscow') AT TIME ZONE 'Europe/Moscow' AS midnight
      FROM unnest(${ends.map((d) => d.toISOString())}::timestamptz[]) WITH ORDINALITY AS x(t, n)`;
    const dayOf = new Array<{ day: string; midnight: Date }>(moving.length);
    for (const r of days) dayOf[r.n - 1] = r;
    const usage = new Map<string, { sessionId: number; day: string; partnerId: string; lessonId: string; mode: string; seconds: number; charged: number }>();
    const perPartner = new Map<string, { charged: number; at: Date }>();
    const sessionRows: { id: number; seconds: number; charged: number }[] = [];
    let totalSeconds = 0;
    let totalCharged = 0;

    for (let k = 0; k < moving.length; k++) {
      const s = moving[k];
      const item = bySession.get(s.id)!;
      const delta = item.cumulativeSeconds - s.seconds;
      const d = dayOf[k];
      const slices: DaySlice[] =
        item.at.getTime() - delta * 1000 >= d.midnight.getTime() ? [{ day: d.day, seconds: delta }] : await splitByMoscowDay(tx, item.at, delta);
      let cumulative = s.seconds;
      let charged = 0;
      for (const slice of slices) {
        const before = chargedFor(cumulative, s.rate_percent);
        cumulative += slice.seconds;
        const sliceCharged = chargedFor(cumulative, s.rate_percent) - before;
        charged += sliceCharged;
        const key = `${s.id}|${slice.day}`;
        const u = usage.get(key) ?? { sessionId: s.id, day: slice.day, partnerId: s.partner_id, lessonId: s.lesson_id, mode: s.mode, seconds: 0, charged: 0 };
        u.seconds += slice.seconds;
        u.charged += sliceCharged;
        usage.set(key, u);
      }
      sessionRows.push({ id: s.id, seconds: cumulative, charged: chargedFor(cumulative, s.rate_percent) });
      const p = perPartner.get(s.partner_id) ?? { charged: 0, at: item.at };
      p.charged += charged;
      if (item.at > p.at) p.at = item.at;
      perPartner.set(s.partner_id, p);
      totalSeconds += delta;
      totalCharged += charged;
    }

    const u = [...usage.values()];
    await tx`
      INSERT INTO usage_daily (session_id, day, partner_id, lesson_id, mode, seconds, charged_seconds)
      SELECT * FROM unnest(${u.map((r) => r.sessionId)}::bigint[], ${u.map((r) => r.day)}::date[], ${u.map((r) => r.partnerId)}::text[],
                           ${u.map((r) => r.lessonId)}::text[], ${u.map((r) => r.mode)}::text[], ${u.map((r) => r.seconds)}::bigint[],
                           ${u.map((r) => r.charged)}::bigint[])
      ON CONFLICT (session_id, day) DO UPDATE SET
        seconds = usage_daily.seconds + EXCLUDED.seconds,
        charged_seconds = usage_daily.charged_seconds + EXCLUDED.charged_seconds`;
    await tx`
      UPDATE sessions s SET seconds = x.seconds, charged_seconds = x.charged
      FROM unnest(${sessionRows.map((r) => r.id)}::bigint[], ${sessionRows.map((r) => r.seconds)}::bigint[], ${sessionRows.map((r) => r.charged)}::bigint[]) AS x(id, seconds, charged)
      WHERE s.id = x.id`;
    await deductAndNotify(tx, perPartner);
    return { seconds: totalSeconds, charged: totalCharged };
  });
}

/**
 * Lock order of a session's start and end: lesson row, then session row, then
 * partner row (a charge takes the last two only), so concurrent starts,
 * charges and ends of one lesson never deadlock.
 *
 * The locks are FOR NO KEY UPDATE, not FOR UPDATE: inserting a row that
 * references a locked row (usage_daily, events, sessions, participant_joins,
 * lesson_meters all do) takes a KEY SHARE lock on it, which FOR UPDATE waits
 * for. Two charges of one partner each holding KEY SHARE on the partner (from
 * their usage_daily insert) and each asking FOR UPDATE on it deadlocked under
 * load; FOR NO KEY UPDATE still serialises us against each other but not
 * against foreign-key checks (test/metering/charge.test.ts, "concurrency").
 */
export async function lockLessonOfSession(tx: Tx, sessionId: number): Promise<void> {
  const [row] = await tx<{ lesson_id: string }[]>`SELECT lesson_id FROM sessions WHERE id = ${sessionId}`;
  if (!row) throw new Error(`session ${sessionId} not found`);
  await tx`SELECT 1 FROM lessons WHERE id = ${row.lesson_id} FOR NO KEY UPDATE`;
}

/**
 * Deducts from the balances (partner id -> seconds charged, and the time of the
 * latest of them); records balance.low when a balance falls below one hour and
 * balance.exhausted when it reaches zero or below, each once per crossing: the
 * event disarms its line, a top-up that lifts the balance back re-arms it
 * (src/domain/ledger.ts topUp). Every partner of the batch in two statements,
 * locked in id order.
 */
export async function deductAndNotify(tx: Tx, charges: Map<string, { charged: number; at: Date }>): Promise<void> {
  const ids = [...charges.keys()].sort();
  if (ids.length === 0) return;
  const rows = await tx<{ id: string; balance_seconds: number; balance_low_armed: boolean; balance_exhausted_armed: boolean }[]>`
    SELECT id, balance_seconds, balance_low_armed, balance_exhausted_armed FROM partners
    WHERE id = ANY(${ids}::text[]) ORDER BY id FOR NO KEY UPDATE`;
  const next = rows.map((p) => {
    const balance = p.balance_seconds - charges.get(p.id)!.charged;
    const fireLow = p.balance_low_armed && balance < BALANCE_LOW_SECONDS;
    const fireExhausted = p.balance_exhausted_armed && balance <= 0;
    return { id: p.id, balance, low: p.balance_low_armed && !fireLow, exhausted: p.balance_exhausted_armed && !fireExhausted, fireLow, fireExhausted };
  });
  await tx`
    UPDATE partners p SET balance_seconds = x.balance, balance_low_armed = x.low::bool, balance_exhausted_armed = x.exhausted::bool
    FROM unnest(${next.map((n) => n.id)}::text[], ${next.map((n) => n.balance)}::bigint[], ${next.map((n) => String(n.low))}::text[],
                ${next.map((n) => String(n.exhausted))}::text[]) AS x(id, balance, low, exhausted)
    WHERE p.id = x.id`; // (booleans as text: postgres.js sends an array of booleans as one boolean)
  for (const n of next) {
    if (!n.fireLow && !n.fireExhausted) continue;
    const data = { balance_seconds: n.balance, balance_minutes: secondsToWholeMinutes(n.balance) };
    const at = charges.get(n.id)!.at;
    if (n.fireLow) await recordEvent(tx, n.id, 'balance.low', data, at);
    if (n.fireExhausted) await recordEvent(tx, n.id, 'balance.exhausted', data, at);
  }
}
