import { AUTH_CHANGED_CHANNEL } from '../db/channels.js';
import type { Db } from '../db/index.js';
import { newId, randomBase62, sha256 } from '../lib/crypto.js';
import type { Partner } from './partners.js';

/** `wbk_` + 32 base62 chars: ~190 random bits. Shown once, stored as sha256 only. */
const KEY_PATTERN = /^wbk_[0-9A-Za-z]{32}$/;

/** Whether a string has the form of a key (a malformed one never needs a lookup). */
export function isApiKeyShaped(s: string): boolean {
  return KEY_PATTERN.test(s);
}

export function generateApiKey(): string {
  return `wbk_${randomBase62(32)}`;
}

export async function createApiKey(db: Db, partnerId: string): Promise<{ id: string; apiKey: string }> {
  const apiKey = generateApiKey();
  const id = newId('key');
  await db`INSERT INTO api_keys (id, partner_id, key_hash) VALUES (${id}, ${partnerId}, ${sha256(apiKey)})`;
  // API processes remember unknown keys for a minute: the new one must not be among them
  await notifyAuthChanged(db, partnerId);
  return { id, apiKey };
}

/** Revokes a key; false when no live key matches. */
export async function revokeApiKey(db: Db, apiKey: string, at: Date): Promise<boolean> {
  if (!KEY_PATTERN.test(apiKey)) return false;
  const rows = await db<{ partner_id: string }[]>`
    UPDATE api_keys SET revoked_at = ${at} WHERE key_hash = ${sha256(apiKey)} AND revoked_at IS NULL RETURNING partner_id`;
  if (rows.length > 0) await notifyAuthChanged(db, rows[0].partner_id);
  return rows.length > 0;
}

/**
 * API processes cache key lookups (src/api/authCache.ts); every change that can
 * turn a key away (revocation, suspension) or make an unknown key valid
 * (creation) notifies them through Postgres, and the notification is
 * delivered only if the change commits.
 */
export async function notifyAuthChanged(db: Db, partnerId: string): Promise<void> {
  await db`SELECT pg_notify(${AUTH_CHANGED_CHANNEL}, ${partnerId})`;
}

export interface Authenticated {
  keyId: string;
  partner: Partner;
}

/**
 * The partner behind a bearer key; `unknown` when no key has that value (or
 * it is malformed), `refused` when it is revoked or its partner suspended.
 * Both answer 401 alike; only an unknown key may be remembered as such (a
 * suspended partner may be resumed any moment: src/api/authCache.ts).
 */
export async function authenticateApiKey(db: Db, apiKey: string): Promise<Authenticated | 'unknown' | 'refused'> {
  if (!KEY_PATTERN.test(apiKey)) return 'unknown';
  const [row] = await db<(Partner & { key_id: string; key_revoked_at: Date | null })[]>`
    SELECT k.id AS key_id, k.revoked_at AS key_revoked_at, p.*
    FROM api_keys k JOIN partners p ON p.id = k.partner_id
    WHERE k.key_hash = ${sha256(apiKey)}`;
  if (!row) return 'unknown';
  const { key_id, key_revoked_at, ...partner } = row;
  if (key_revoked_at || partner.suspended_at) return 'refused';
  return { keyId: key_id, partner };
}
