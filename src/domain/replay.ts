import type { Db } from '../db/index.js';
import { boardHistory } from '../board/store.js';
import type { HistoryEntry } from '../board/history.js';
import { Errors } from '../errors.js';
import { newId, randomToken, sha256 } from '../lib/crypto.js';
import { linkTokenHash, LINK_TTL_MINUTES_MAX } from './links.js';
import type { Lesson } from './lessons.js';
import { personRef } from './people.js';

export { LINK_TTL_MINUTES_MAX };

/** A history entry as partners and the replay page read it: its author also as the partner's person reference. */
export interface HistoryItem extends HistoryEntry {
  /** psn_…, as in attendance; null for a write without a person */
  person: string | null;
}

/**
 * A page of a board's history after `afterSeq`, oldest first (docs/snapshot-format.md, "History").
 * The author's person reference comes from the link the person arrived through (their presence
 * marks name it): a person who wrote was present, so every author has one once the gateway has
 * written their arrival (in batches: a read just after it may still show null).
 */
export async function readHistory(db: Db, lessonId: string, afterSeq: number, limit: number): Promise<HistoryItem[]> {
  const entries = await boardHistory(db, lessonId, afterSeq, limit);
  const ids = [...new Set(entries.flatMap((e) => (e.person_id ? [e.person_id] : [])))];
  const refs = new Map<string, string>();
  if (ids.length) {
    const rows = await db<{ person_id: string; user_hash: string }[]>`
      SELECT DISTINCT ON (m.person_id) m.person_id, k.user_hash
      FROM presence_marks m JOIN links k ON k.id = m.link_id
      WHERE m.lesson_id = ${lessonId} AND m.person_id = ANY(${ids}::text[]) AND m.joined
      ORDER BY m.person_id, m.at DESC`;
    for (const r of rows) refs.set(r.person_id, personRef(r.user_hash));
  }
  return entries.map((e) => ({ ...e, person: e.person_id ? (refs.get(e.person_id) ?? null) : null }));
}

export interface IssuedReplayLink {
  id: string;
  url: string;
  token: string;
  expires_at: Date;
}

/**
 * Issues a read-only replay link (docs/api-decisions.md, "Replay links"). Only the token's sha256 is
 * stored. Like an entry link it expires, and none is issued for a lesson archived meanwhile (the
 * lesson is read FOR SHARE, as issueLink does). Unlike one it is not refused at a zero balance:
 * a replay is never billed.
 */
export async function issueReplayLink(db: Db, opts: { lesson: Lesson; ttlMinutes: number; embedBaseUrl: string; at: Date }): Promise<IssuedReplayLink> {
  const token = randomToken(32);
  const id = newId('rpl');
  const expires_at = new Date(opts.at.getTime() + opts.ttlMinutes * 60_000);
  const issued = await db`
    WITH live AS (SELECT id, partner_id FROM lessons WHERE id = ${opts.lesson.id} AND archived_at IS NULL FOR SHARE)
    INSERT INTO replay_links (id, lesson_id, partner_id, token_hash, expires_at, created_at)
    SELECT ${id}, live.id, live.partner_id, ${sha256(token)}, ${expires_at}, ${opts.at} FROM live
    RETURNING id`;
  if (issued.length === 0) throw Errors.archived();
  return { id, url: `${opts.embedBaseUrl}/replay/${token}`, token, expires_at };
}

export interface ResolvedReplayLink {
  id: string;
  lesson_id: string;
  lesson_title: string;
  subject_mode: Lesson['subject_mode'];
  expires_at: Date;
  archived: boolean;
}

/** The replay link of a token, undefined for one that is none (expiry and archiving are the caller's rule). */
export async function resolveReplayToken(db: Db, token: string): Promise<ResolvedReplayLink | undefined> {
  const hash = linkTokenHash(token);
  if (!hash) return undefined;
  const [row] = await db<ResolvedReplayLink[]>`
    SELECT r.id, r.lesson_id, l.title AS lesson_title, l.subject_mode, r.expires_at, (l.archived_at IS NOT NULL) AS archived
    FROM replay_links r JOIN lessons l ON l.id = r.lesson_id WHERE r.token_hash = ${hash}`;
  return row;
}
