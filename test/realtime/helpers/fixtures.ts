import type { Sql } from '../../../src/db/index.js';
import { issueLink, type ResolvedLink, type Role } from '../../../src/domain/links.js';
import { randomBase62 } from '../../../src/lib/crypto.js';
import type { Lesson, LessonMode } from '../../../src/domain/lessons.js';
import type { Partner } from '../../../src/domain/partners.js';
import { partnerFactory } from '../../helpers/factories.js';
import { lessonFactory } from '../../helpers/lessons.js';

/** A partner, a lesson, and a way to issue links for people of it. */
export async function lessonWithLinks(sql: Sql, opts: { mode?: LessonMode; minutes?: number; plan?: 'full' | 'board_only'; boardRatePercent?: number; at?: Date } = {}) {
  const { partner, apiKey } = await partnerFactory(sql, { minutes: opts.minutes ?? 600, plan: opts.plan, boardRatePercent: opts.boardRatePercent });
  const lesson = await lessonFactory(sql, partner, { mode: opts.mode, external_id: `ext-${Math.random().toString(36).slice(2)}` });
  return { partner, apiKey, lesson, link: (userId: string, o: { role?: Role; name?: string; ttl?: number; at?: Date } = {}) => linkFor(sql, partner, lesson, userId, o) };
}

export async function linkFor(
  sql: Sql,
  partner: Partner,
  lesson: Lesson,
  userId: string,
  o: { role?: Role; name?: string; ttl?: number; at?: Date } = {},
): Promise<string> {
  const l = await issueLink(sql, {
    partner,
    lesson,
    input: { user: { id: userId, name: o.name ?? userId, role: o.role ?? 'student' }, ttl_minutes: o.ttl ?? 180 },
    embedBaseUrl: 'http://localhost',
    at: o.at ?? new Date(),
  });
  return l.token;
}

export async function lessonRow(sql: Sql, lessonId: string) {
  const [row] = await sql<{ started_at: Date | null; ended_at: Date | null; billed_seconds: number }[]>`
    SELECT started_at, ended_at, billed_seconds FROM lessons_billed WHERE id = ${lessonId}`;
  return row;
}

export async function sessionsOf(sql: Sql, lessonId: string) {
  return sql<{ id: number; started_at: Date; ended_at: Date | null; seconds: number; charged_seconds: number; people_max: number }[]>`
    SELECT id, started_at, ended_at, seconds, charged_seconds, people_max FROM sessions WHERE lesson_id = ${lessonId} ORDER BY id`;
}

/** A link as a lookup resolves it, with no row behind it (the in-memory parts: InMemoryLinks, memoryParts). */
export function resolvedLink(o: { lessonId?: string; name?: string; expiresAt: Date }): ResolvedLink {
  return {
    link_id: randomBase62(12),
    lesson_id: o.lessonId ?? randomBase62(12),
    partner_id: 'partner',
    user_hash: randomBase62(16),
    name: o.name ?? 'Ann',
    role: 'student',
    expires_at: o.expiresAt,
    lesson_mode: 'full',
    subject_mode: 'generic',
    lesson_title: 'Lesson',
    external_id: null,
    archived: false,
    revoked: false,
  };
}
