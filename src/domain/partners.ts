import { randomBytes } from 'node:crypto';
import type { Db } from '../db/index.js';
import { newId } from '../lib/crypto.js';
import { Errors } from '../errors.js';
import { notifyAuthChanged } from './apiKeys.js';
import type { Plan } from './enums.js';

export type { Plan };

/**
 * The board rate default: a second of a `board_only` lesson is billed at this
 * share (percent) of a `full` one, unless the partner was created with another
 * (`admin partner create --board-rate-percent`). Stated here only; repeated by
 * the column default of partners.board_rate_percent
 * (migrations/001_foundation.sql), which test/api/admin.test.ts checks against
 * this value.
 */
export const DEFAULT_BOARD_RATE_PERCENT = 30;

export interface Partner {
  id: string;
  name: string;
  plan: Plan;
  board_rate_percent: number;
  user_hash_key: Buffer;
  balance_seconds: number;
  suspended_at: Date | null;
  created_at: Date;
}

export async function createPartner(
  db: Db,
  input: { name: string; plan?: Plan; boardRatePercent?: number },
): Promise<Partner> {
  const [p] = await db<Partner[]>`
    INSERT INTO partners (id, name, plan, board_rate_percent, user_hash_key)
    VALUES (${newId('ptr')}, ${input.name}, ${input.plan ?? 'full'}, ${input.boardRatePercent ?? DEFAULT_BOARD_RATE_PERCENT}, ${randomBytes(32)})
    RETURNING *`;
  return p;
}

export async function setPartnerSuspended(db: Db, id: string, suspended: boolean, at: Date): Promise<Partner> {
  const [p] = await db<Partner[]>`
    UPDATE partners SET suspended_at = ${suspended ? at : null} WHERE id = ${id} RETURNING *`;
  if (!p) throw Errors.notFound('Partner');
  await notifyAuthChanged(db, id);
  return p;
}
