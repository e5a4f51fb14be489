import { LINK_ISSUED_CHANNEL, LINK_REVOKED_CHANNEL } from '../db/channels.js';
import type { Db } from '../db/index.js';
import { hmacHex, newId, randomToken, sha256 } from '../lib/crypto.js';
import { Errors } from '../errors.js';
import type { Lesson } from './lessons.js';
import type { Partner } from './partners.js';
import type { Role } from './enums.js';
import { personRef } from './people.js';

export type { Role };

/** A link lives at most this long (the spec's `ttl_minutes`, 15-720): a removal older than that can refuse no link still valid. */
export const LINK_TTL_MINUTES_MAX = 720;

interface LinkInput {
  user: { id: string; name: string; role: Role };
  ttl_minutes: number;
}

export interface IssuedLink {
  id: string;
  /** the partner's reference to the person (personRef) */
  person: string;
  url: string;
  token: string;
  expires_at: Date;
}

/**
 * The person behind a partner's user id: HMAC-SHA256 keyed with the partner's
 * own key, so the same id gives the same hash across that partner's lessons,
 * a different one at another partner, and the id itself is never stored.
 */
export function hashUserId(partner: Pick<Partner, 'user_hash_key'>, userId: string): string {
  return hmacHex(partner.user_hash_key, userId);
}

/** What LINK_ISSUED_CHANNEL carries: the token's sha256 (base64) and the link as a lookup resolves it. */
interface IssuedLinkNotice {
  hash: string;
  link: ResolvedLink;
}

/**
 * Issues a personal entry link. Only the token's sha256 is stored; the token
 * itself exists only in this response. No new links while the balance has no
 * seconds left (402 minutes_exhausted, docs/api-decisions.md), nor for a
 * lesson archived meanwhile (410 archived).
 */
export async function issueLink(
  db: Db,
  opts: { partner: Partner; lesson: Lesson; input: LinkInput; embedBaseUrl: string; at: Date },
): Promise<IssuedLink> {
  const { partner, lesson, input, at } = opts;
  const [bal] = await db<{ balance_seconds: number }[]>`SELECT balance_seconds FROM partners WHERE id = ${partner.id}`;
  if (!bal || bal.balance_seconds <= 0) throw Errors.minutesExhausted();
  const token = randomToken(32);
  const tokenHash = sha256(token);
  const link: ResolvedLink = {
    link_id: newId('lnk'),
    lesson_id: lesson.id,
    partner_id: partner.id,
    user_hash: hashUserId(partner, input.user.id),
    name: input.user.name,
    role: input.user.role,
    expires_at: new Date(at.getTime() + input.ttl_minutes * 60_000),
    lesson_mode: lesson.mode,
    subject_mode: lesson.subject_mode,
    lesson_title: lesson.title,
    external_id: lesson.external_id,
    archived: false,
    revoked: false,
  };
  const notice: IssuedLinkNotice = { hash: tokenHash.toString('base64'), link };
  // The lesson is read FOR SHARE, which waits for an archive in progress (its
  // UPDATE) and holds off one that comes later: either the link commits, and
  // is announced, before the lesson's archive, or it sees the archive and is
  // not issued at all. Without the lock both could commit, the link's
  // announcement after the archive's.
  const issued = await db`
    WITH live AS (
      SELECT id FROM lessons WHERE id = ${lesson.id} AND archived_at IS NULL FOR SHARE),
    issued AS (
      INSERT INTO links (id, lesson_id, partner_id, token_hash, user_hash, name, role, expires_at, created_at)
      SELECT ${link.link_id}, live.id, ${partner.id}, ${tokenHash}, ${link.user_hash},
             ${link.name}, ${link.role}, ${link.expires_at}, ${at}
      FROM live
      RETURNING id)
    SELECT pg_notify(${LINK_ISSUED_CHANNEL}, ${JSON.stringify(notice)}) FROM issued`;
  if (issued.length === 0) throw Errors.archived();
  return { id: link.link_id, person: personRef(link.user_hash), url: `${opts.embedBaseUrl}/embed/${token}`, token, expires_at: link.expires_at };
}

export interface ResolvedLink {
  link_id: string;
  lesson_id: string;
  partner_id: string;
  user_hash: string;
  name: string;
  role: Role;
  expires_at: Date;
  lesson_mode: Lesson['mode'];
  subject_mode: Lesson['subject_mode'];
  lesson_title: string;
  external_id: string | null;
  archived: boolean;
  /** DELETE /lessons/{id}/links/{link_id}: refused from then on */
  revoked: boolean;
}

/** Looks a token up by its hash (one index probe). Undefined for unknown tokens; expiry is the caller's rule. */
export async function resolveLinkToken(db: Db, token: string): Promise<ResolvedLink | undefined> {
  return (await resolveLinkTokenHashes(db, [linkTokenHash(token)]))[0];
}

const TOKEN_SHAPE = /^[A-Za-z0-9_-]{20,100}$/;

/** What links store of a token (its sha256); undefined when the string cannot be a token at all. */
export function linkTokenHash(token: string): Buffer | undefined {
  return TOKEN_SHAPE.test(token) ? sha256(token) : undefined;
}

/**
 * Links of many tokens, given as their hashes (linkTokenHash), in one
 * statement with one index probe each: the gateway batches the lookups of a
 * burst of arrivals, and hashes each token once for its cache and this. One
 * result per hash, in order.
 */
export async function resolveLinkTokenHashes(db: Db, tokenHashes: (Buffer | undefined)[]): Promise<(ResolvedLink | undefined)[]> {
  const hashes = tokenHashes.map((h) => h?.toString('hex'));
  const wanted = [...new Set(hashes.filter((h): h is string => h !== undefined))];
  if (wanted.length === 0) return hashes.map(() => undefined);
  const rows = await db<(ResolvedLink & { token_hex: string })[]>`
    SELECT encode(k.token_hash, 'hex') AS token_hex,
           k.id AS link_id, k.lesson_id, k.partner_id, k.user_hash, k.name, k.role, k.expires_at,
           l.mode AS lesson_mode, l.subject_mode, l.title AS lesson_title, l.external_id,
           (l.archived_at IS NOT NULL) AS archived, (k.revoked_at IS NOT NULL) AS revoked
    FROM links k JOIN lessons l ON l.id = k.lesson_id
    WHERE k.token_hash = ANY(ARRAY(SELECT decode(h, 'hex') FROM unnest(${wanted}::text[]) AS h))`;
  const byHash = new Map<string, ResolvedLink>();
  for (const { token_hex, ...link } of rows) byHash.set(token_hex, link);
  return hashes.map((h) => (h === undefined ? undefined : byHash.get(h)));
}

/** Reads a LINK_ISSUED_CHANNEL payload; undefined for anything else (it is only a hint: a lookup still works). */
export function parseIssuedLinkNotice(payload: string): IssuedLinkNotice | undefined {
  try {
    const n = JSON.parse(payload) as IssuedLinkNotice;
    if (typeof n?.hash !== 'string' || typeof n.link?.lesson_id !== 'string') return undefined;
    const expires = new Date(n.link.expires_at);
    if (Number.isNaN(expires.getTime())) return undefined;
    return { hash: n.hash, link: { ...n.link, expires_at: expires, archived: false, revoked: false } };
  } catch {
    return undefined;
  }
}

export interface LinkInfo {
  id: string;
  user_hash: string;
  name: string;
  role: Role;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/** Every link issued for the lesson, oldest first (never the token: only its hash is stored). */
export async function listLinks(db: Db, lessonId: string): Promise<LinkInfo[]> {
  return db<LinkInfo[]>`
    SELECT id, user_hash, name, role, created_at, expires_at, revoked_at, last_used_at
    FROM links WHERE lesson_id = ${lessonId} ORDER BY created_at, id`;
}

/** What LINK_REVOKED_CHANNEL carries: the link, its lesson, and its token's sha256 (base64) for the gateways' caches. */
export interface RevokedLinkNotice {
  lesson_id: string;
  link_id: string;
  hash: string;
}

/**
 * Revokes a link of the lesson (idempotent: a revoked link stays revoked at its
 * first time). The notification goes out in the statement that revokes, so
 * every gateway hears it if and only if it commits; they refuse the link and
 * close its sockets (realtime/features/links). 404 for a link not of this lesson.
 */
export async function revokeLink(db: Db, lessonId: string, linkId: string, at: Date): Promise<LinkInfo> {
  const [row] = await db<LinkInfo[]>`
    WITH revoked AS (
      UPDATE links SET revoked_at = COALESCE(revoked_at, ${at})
      WHERE id = ${linkId} AND lesson_id = ${lessonId}
      RETURNING id, user_hash, name, role, created_at, expires_at, revoked_at, last_used_at, lesson_id, token_hash)
    SELECT r.id, r.user_hash, r.name, r.role, r.created_at, r.expires_at, r.revoked_at, r.last_used_at
    FROM revoked r, pg_notify(${LINK_REVOKED_CHANNEL},
      json_build_object('lesson_id', r.lesson_id, 'link_id', r.id, 'hash', encode(r.token_hash, 'base64'))::text)`;
  if (!row) throw Errors.notFound('Link');
  return row;
}

/** Reads a LINK_REVOKED_CHANNEL payload; undefined for anything else. */
export function parseRevokedLinkNotice(payload: string): RevokedLinkNotice | undefined {
  try {
    const n = JSON.parse(payload) as RevokedLinkNotice;
    if (typeof n?.lesson_id !== 'string' || typeof n.link_id !== 'string' || typeof n.hash !== 'string') return undefined;
    return n;
  } catch {
    return undefined;
  }
}
