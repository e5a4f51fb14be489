import type { Db, Sql } from '../db/index.js';
import { Errors } from '../errors.js';
import type { Partner } from './partners.js';

/** balance.low fires when less than one hour remains. */
export const BALANCE_LOW_SECONDS = 3600;

/**
 * Money in: a top-up adds minutes to the balance and records what was paid
 * (rub = 0 for free minutes). The calls report prices minutes from this ledger.
 * A top-up that lifts the balance back over a line re-arms that line's
 * balance event (balance.low at one hour, balance.exhausted at zero).
 */
export async function topUp(
  sql: Sql,
  input: { partnerId: string; minutes: number; rub?: string; at: Date },
): Promise<{ balance_seconds: number }> {
  if (!Number.isInteger(input.minutes) || input.minutes <= 0) throw Errors.badRequest('minutes must be a positive integer');
  if (input.rub !== undefined && !/^\d{1,12}(\.\d{1,2})?$/.test(input.rub)) throw Errors.badRequest('rub must be a non-negative amount with at most 2 decimals');
  return sql.begin(async (tx) => {
    const seconds = input.minutes * 60;
    const [p] = await tx<{ balance_seconds: number }[]>`
      UPDATE partners SET
        balance_seconds = balance_seconds + ${seconds},
        balance_low_armed = balance_low_armed OR balance_seconds + ${seconds} >= ${BALANCE_LOW_SECONDS},
        balance_exhausted_armed = balance_exhausted_armed OR balance_seconds + ${seconds} > 0
      WHERE id = ${input.partnerId} RETURNING balance_seconds`;
    if (!p) throw Errors.notFound('Partner');
    await tx`INSERT INTO topups (partner_id, seconds, rub, created_at)
             VALUES (${input.partnerId}, ${seconds}, ${input.rub ?? '0'}, ${input.at})`;
    return { balance_seconds: p.balance_seconds };
  });
}

export interface Balance {
  balance_seconds: number;
  balance_minutes: number;
  plan: Partner['plan'];
  board_rate_percent: number;
}

/** Whole minutes, truncated toward zero (-59 s is 0 minutes, -60 s is -1). */
export function secondsToWholeMinutes(seconds: number): number {
  return Math.trunc(seconds / 60) || 0;
}

export async function getBalance(db: Db, partnerId: string): Promise<Balance> {
  const [p] = await db<Partner[]>`SELECT plan, board_rate_percent, balance_seconds FROM partners WHERE id = ${partnerId}`;
  if (!p) throw Errors.notFound('Partner');
  return {
    balance_seconds: p.balance_seconds,
    balance_minutes: secondsToWholeMinutes(p.balance_seconds),
    plan: p.plan,
    board_rate_percent: p.board_rate_percent,
  };
}
