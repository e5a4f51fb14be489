import type { Db } from '../../db/index.js';

/** How long a key's first response is kept and replayed (Stripe's 24 h). */
export const IDEMPOTENCY_TTL_MS = 24 * 3600_000;
/** A key held this long without a response is taken over by a retry (its process died). */
export const IDEMPOTENCY_LOCK_MS = 60_000;

export interface StoredResponse {
  status: number;
  body: string | null;
}

export type Claim =
  | { kind: 'owner' }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'mismatch' }
  | { kind: 'running' };

/**
 * Takes a partner's key for this request, or tells what holds it. A row that
 * expired (24 h), or whose holder stopped answering (lock past), is replaced.
 */
export async function claimKey(db: Db, partnerId: string, key: string, requestHash: Buffer, at: Date): Promise<Claim> {
  const expiredBefore = new Date(at.getTime() - IDEMPOTENCY_TTL_MS);
  const lockedUntil = new Date(at.getTime() + IDEMPOTENCY_LOCK_MS);
  const [taken] = await db`
    INSERT INTO idempotency_keys AS k (partner_id, key, request_hash, created_at, locked_until)
    VALUES (${partnerId}, ${key}, ${requestHash}, ${at}, ${lockedUntil})
    ON CONFLICT (partner_id, key) DO UPDATE
      SET request_hash = EXCLUDED.request_hash, created_at = EXCLUDED.created_at,
          locked_until = EXCLUDED.locked_until, status = NULL, body = NULL
      WHERE k.created_at <= ${expiredBefore}
         OR (k.status IS NULL AND k.locked_until <= ${at} AND k.request_hash = EXCLUDED.request_hash)
    RETURNING 1 AS taken`;
  if (taken) return { kind: 'owner' };
  const [row] = await db<{ request_hash: Buffer; status: number | null; body: string | null }[]>`
    SELECT request_hash, status, body FROM idempotency_keys WHERE partner_id = ${partnerId} AND key = ${key}`;
  // the holder gave it up (its request failed validation) between our two statements: try again
  if (!row) return claimKey(db, partnerId, key, requestHash, at);
  if (!row.request_hash.equals(requestHash)) return { kind: 'mismatch' };
  if (row.status === null) return { kind: 'running' };
  return { kind: 'replay', response: { status: row.status, body: row.body } };
}

export async function saveResponse(db: Db, partnerId: string, key: string, response: StoredResponse): Promise<void> {
  await db`
    UPDATE idempotency_keys SET status = ${response.status}, body = ${response.body}
    WHERE partner_id = ${partnerId} AND key = ${key} AND status IS NULL`;
}

/** The request did not run (bad input, dependency down): the key is free for a corrected retry. */
export async function releaseKey(db: Db, partnerId: string, key: string): Promise<void> {
  await db`DELETE FROM idempotency_keys WHERE partner_id = ${partnerId} AND key = ${key} AND status IS NULL`;
}

/** Drops keys past their 24 h; run from time to time by each API process. */
export async function purgeExpiredKeys(db: Db, at: Date): Promise<number> {
  const rows = await db`
    DELETE FROM idempotency_keys WHERE ctid IN (
      SELECT ctid FROM idempotency_keys WHERE created_at <= ${new Date(at.getTime() - IDEMPOTENCY_TTL_MS)} LIMIT 10000)`;
  return rows.count;
}
