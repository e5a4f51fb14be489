import type { Sql, Tx } from '../db/index.js';
import { recordEvent } from '../events/outbox.js';
import { BALANCE_LOW_SECONDS, secondsToWholeMinutes } from '../domain/ledger.js';
import { splitByMoscowDay } from './moscow.js';
import type { Session } from './sessions.js';

/** Cumulative charge of `seconds` metered seconds: the floor is taken once over the whole session. */
export function chargedFor(seconds: number, ratePercent: number): number {
  return Math.floor((seconds * ratePercent) / 100);
}

export interface ChargeResult {
  /** metered seconds newly recorded by this call (0 when it was a replay) */
  seconds: number;
  /** balance seconds newly deducted */
  charged: number;
  balance_seconds: number | null;
}

/**
 * Records that session `sessionId` has been metered up to `cumulativeSeconds`,
 * the total reached at instant `at`. The call is a watermark, not an increment:
 * replaying it, or two gateway nodes reporting the same total, charges nothing
 * twice (only a higher total moves anything).
 *
 * Contract for the caller: metering between two calls is continuous (call at
 * every pause, at the end, and periodically), so the new seconds are exactly
 * the ones in (at - delta, at]; they are split at Moscow midnight to the second.
 *
 * In one transaction: sessions.seconds/charged_seconds, usage_daily per Moscow
 * day, lessons.billed_seconds, partners.balance_seconds, and balance.low /
 * balance.exhausted when the balance crosses their lines while armed.
 */
export async function recordMeteredTime(
  sql: Sql,
  input: { sessionId: number; cumulativeSeconds: number; at: Date; people?: number },
): Promise<ChargeResult> {
  if (!Number.isInteger(input.cumulativeSeconds) || input.cumulativeSeconds < 0) {
    throw new Error('cumulativeSeconds must be a non-negative integer');
  }
  return sql.begin(async (tx) => {
    await lockLessonOfSession(tx, input.sessionId);
    const [s] = await tx<Session[]>`SELECT * FROM sessions WHERE id = ${input.sessionId} FOR NO KEY UPDATE`;
    const delta = input.cumulativeSeconds - s.seconds;
    if (input.people && input.people > s.people_max) {
      await tx`UPDATE sessions SET people_max = ${input.people} WHERE id = ${s.id}`;
    }
    if (delta <= 0 || s.ended_at) return { seconds: 0, charged: 0, balance_seconds: null };

    const slices = await splitByMoscowDay(tx, input.at, delta);
    let cumulative = s.seconds;
    let charged = 0;
    for (const slice of slices) {
      const before = chargedFor(cumulative, s.rate_percent);
      cumulative += slice.seconds;
      const sliceCharged = chargedFor(cumulative, s.rate_percent) - before;
      charged += sliceCharged;
      await tx`
        INSERT INTO usage_daily (session_id, day, partner_id, lesson_id, mode, seconds, charged_seconds)
        VALUES (${s.id}, ${slice.day}, ${s.partner_id}, ${s.lesson_id}, ${s.mode}, ${slice.seconds}, ${sliceCharged})
        ON CONFLICT (session_id, day) DO UPDATE SET
          seconds = usage_daily.seconds + EXCLUDED.seconds,
          charged_seconds = usage_daily.charged_seconds + EXCLUDED.charged_seconds`;
    }
    await tx`UPDATE sessions SET seconds = ${cumulative}, charged_seconds = ${chargedFor(cumulative, s.rate_percent)} WHERE id = ${s.id}`;
    await tx`UPDATE lessons SET billed_seconds = billed_seconds + ${delta} WHERE id = ${s.lesson_id}`;
    const balance = await deductAndNotify(tx, s.partner_id, charged, input.at);
    return { seconds: delta, charged, balance_seconds: balance };
  });
}

/**
 * Lock order everywhere in metering: lesson row, then session row, then partner
 * row, so concurrent starts, charges and ends of one lesson never deadlock.
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
 * Deducts from the balance; records balance.low when it falls below one hour and
 * balance.exhausted when it reaches zero or below, each once per crossing: the
 * event disarms its line, a top-up that lifts the balance back re-arms it
 * (src/domain/ledger.ts topUp).
 */
export async function deductAndNotify(tx: Tx, partnerId: string, charged: number, at: Date): Promise<number> {
  const [p] = await tx<{ balance_seconds: number; balance_low_armed: boolean; balance_exhausted_armed: boolean }[]>`
    SELECT balance_seconds, balance_low_armed, balance_exhausted_armed FROM partners WHERE id = ${partnerId} FOR NO KEY UPDATE`;
  const balance = p.balance_seconds - charged;
  const fireLow = p.balance_low_armed && balance < BALANCE_LOW_SECONDS;
  const fireExhausted = p.balance_exhausted_armed && balance <= 0;
  await tx`
    UPDATE partners SET balance_seconds = ${balance},
      balance_low_armed = ${p.balance_low_armed && !fireLow},
      balance_exhausted_armed = ${p.balance_exhausted_armed && !fireExhausted}
    WHERE id = ${partnerId}`;
  const data = { balance_seconds: balance, balance_minutes: secondsToWholeMinutes(balance) };
  if (fireLow) await recordEvent(tx, partnerId, 'balance.low', data, at);
  if (fireExhausted) await recordEvent(tx, partnerId, 'balance.exhausted', data, at);
  return balance;
}
