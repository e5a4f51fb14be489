import { LESSON_ARCHIVED_CHANNEL, LESSON_UPDATED_CHANNEL } from '../db/channels.js';
import type { Db, Sql } from '../db/index.js';
import { isUniqueViolation } from '../db/index.js';
import { Batcher } from '../lib/Batcher.js';
import { newId } from '../lib/crypto.js';
import { Errors } from '../errors.js';
import type { Partner } from './partners.js';
import type { LessonMode, SubjectMode } from './enums.js';

export type { LessonMode, SubjectMode };

export interface Lesson {
  id: string;
  partner_id: string;
  external_id: string | null;
  title: string;
  mode: LessonMode;
  subject_mode: SubjectMode;
  created_at: Date;
  started_at: Date | null;
  ended_at: Date | null;
  /** the sum of the lesson's sessions' metered seconds, taken when the lesson is read (view lessons_billed, migration 012) */
  billed_seconds: number;
  archived_at: Date | null;
}

interface CreateLessonInput {
  title: string;
  external_id?: string;
  mode?: LessonMode;
  subject_mode?: SubjectMode;
}

/** Plan rules: the mode defaults to the plan's; the board-only plan cannot hold `full` lessons. */
export function resolveMode(plan: Partner['plan'], requested?: LessonMode): LessonMode {
  if (plan === 'board_only') {
    if (requested === 'full') throw Errors.planBoardOnly();
    return 'board_only';
  }
  return requested ?? 'full';
}

export async function createLesson(db: Db, partner: Partner, input: CreateLessonInput, at: Date): Promise<Lesson> {
  const mode = resolveMode(partner.plan, input.mode);
  try {
    const [lesson] = await db<Lesson[]>`
      INSERT INTO lessons (id, partner_id, external_id, title, mode, subject_mode, created_at)
      VALUES (${newId('lsn')}, ${partner.id}, ${input.external_id ?? null}, ${input.title}, ${mode},
              ${input.subject_mode ?? 'generic'}, ${at})
      RETURNING id, partner_id, external_id, title, mode, subject_mode, created_at, started_at, ended_at, archived_at,
                0::bigint AS billed_seconds`; // a new lesson has no session yet
    return lesson;
  } catch (err) {
    // The unique index decides under concurrency; no check-then-insert race.
    if (isUniqueViolation(err, 'lessons_partner_external_live')) throw Errors.conflict();
    throw err;
  }
}

/** A lesson of this partner, archived or not; another partner's lesson is "not found". */
export async function findLesson(db: Db, partnerId: string, id: string): Promise<Lesson | undefined> {
  const [lesson] = await db<Lesson[]>`SELECT * FROM lessons_billed WHERE id = ${id} AND partner_id = ${partnerId}`;
  return lesson;
}

/** findLesson's signature without the connection: what the partner API's routes look lessons up with. */
export type LessonLookup = (partnerId: string, id: string) => Promise<Lesson | undefined>;

/**
 * findLesson for many requests at once: the lookups made in one event-loop
 * turn go to Postgres as one statement (up to `max` each), so under load a
 * GET costs a share of a query instead of a whole one (docs/benchmarks.md). The
 * statement is sent after every request in it arrived, so a request still sees
 * everything committed before it. The partner scope is in the statement: a
 * lesson comes back only with the partner that asked for it.
 */
export function batchedLessonLookup(db: Db, opts: { max: number; concurrency: number }): LessonLookup {
  const batcher = new Batcher<{ partnerId: string; id: string }, Lesson | undefined>(
    async (keys) => {
      // One primary-key probe per key. A plain JOIN would do, but postgres.js prepares statements and
      // Postgres then keeps one plan per connection: planned on a small table, a JOIN stays a hash join over
      // a scan of the whole table after it grows, until the next ANALYZE (4 ms a batch at 60,000 lessons,
      // measured). LATERAL ... LIMIT 1 (no-op: ids are unique) keeps the probe, as the single-row statement
      // does, unless the table was analyzed at about one row (then both scan until autoanalyze: docs/benchmarks.md).
      const rows = await db<Lesson[]>`
        SELECT l.* FROM unnest(${keys.map((k) => k.id)}::text[], ${keys.map((k) => k.partnerId)}::text[]) AS k(id, partner_id)
        CROSS JOIN LATERAL (SELECT * FROM lessons_billed WHERE id = k.id AND partner_id = k.partner_id LIMIT 1) l`;
      const found = new Map(rows.map((l) => [`${l.partner_id} ${l.id}`, l]));
      return keys.map((k) => found.get(`${k.partnerId} ${k.id}`));
    },
    { delayMs: 0, ...opts },
  );
  // Postgres text cannot hold NUL: such an id names no lesson, and must not fail the batch it would join.
  return (partnerId, id) => (id.includes('\0') ? Promise.resolve(undefined) : batcher.add({ partnerId, id }));
}

/** The live lesson for a route that names it: 404 not_found, or 410 archived. */
export async function getLiveLesson(lookup: LessonLookup, partnerId: string, id: string): Promise<Lesson> {
  const lesson = await lookup(partnerId, id);
  if (!lesson) throw Errors.notFound();
  if (lesson.archived_at) throw Errors.archived();
  return lesson;
}

/** Every lesson with that external_id, archived ones included, newest first. */
export async function findLessonsByExternalId(db: Db, partnerId: string, externalId: string): Promise<Lesson[]> {
  return db<Lesson[]>`
    SELECT * FROM lessons_billed WHERE partner_id = ${partnerId} AND external_id = ${externalId}
    ORDER BY created_at DESC, id DESC`;
}

/** What GET /lessons filters on: `live` while a session runs, `ended`, `never_started`, `archived`. */
export const LESSON_STATUSES = ['live', 'ended', 'never_started', 'archived'] as const;
export type LessonStatus = (typeof LESSON_STATUSES)[number];

export interface LessonListOptions {
  limit: number;
  /** the last lesson of the previous page (a cursor) */
  after?: string;
  status?: LessonStatus;
  createdGte?: Date;
  createdLt?: Date;
}

/**
 * A page of lessons, newest first, continuing after the lesson `after`: keyset
 * pagination on (created_at, id) along the lessons_partner_created index, so a
 * page costs the same at any depth. Without a status, the lessons not archived.
 * The status follows the lesson's latest session: `started_at` is set when a
 * session starts and `ended_at` when it ends (null while one runs).
 */
export async function listLessons(db: Db, partnerId: string, opts: LessonListOptions): Promise<Lesson[]> {
  let cursor: Pick<Lesson, 'created_at' | 'id'> | undefined;
  if (opts.after) {
    cursor = await findLesson(db, partnerId, opts.after);
    if (!cursor) throw Errors.badRequest('starting_after: unknown lesson id');
  }
  const status = opts.status;
  return db<Lesson[]>`
    SELECT * FROM lessons_billed
    WHERE partner_id = ${partnerId}
      AND ${status === 'archived' ? db`archived_at IS NOT NULL` : db`archived_at IS NULL`}
      ${status === 'live' ? db`AND started_at IS NOT NULL AND ended_at IS NULL` : db``}
      ${status === 'ended' ? db`AND ended_at IS NOT NULL` : db``}
      ${status === 'never_started' ? db`AND started_at IS NULL` : db``}
      ${opts.createdGte ? db`AND created_at >= ${opts.createdGte}` : db``}
      ${opts.createdLt ? db`AND created_at < ${opts.createdLt}` : db``}
      ${cursor ? db`AND (created_at, id) < (${cursor.created_at}, ${cursor.id})` : db``}
    ORDER BY created_at DESC, id DESC LIMIT ${opts.limit}`;
}

export interface LessonUpdate {
  title?: string;
  subject_mode?: SubjectMode;
  mode?: LessonMode;
}

/**
 * PATCH /lessons/{id}. `mode` changes only while no session runs (a session's
 * mode and rate are fixed at its start) and under the plan's rule (403
 * plan_board_only). The lesson row is locked first: a session start locks it
 * too (src/metering/sessions.ts), so the check of running sessions, made after
 * the lock, sees every start that committed before, and a later start waits
 * and reads the new mode. The change is announced to the gateways in the same
 * transaction (LESSON_UPDATED_CHANNEL).
 */
export async function updateLesson(sql: Sql, partner: Partner, id: string, input: LessonUpdate): Promise<Lesson> {
  return sql.begin(async (tx) => {
    const [row] = await tx<{ mode: LessonMode; archived_at: Date | null }[]>`
      SELECT mode, archived_at FROM lessons WHERE id = ${id} AND partner_id = ${partner.id} FOR NO KEY UPDATE`;
    if (!row) throw Errors.notFound();
    if (row.archived_at) throw Errors.archived();
    if (input.mode !== undefined && input.mode !== row.mode) {
      resolveMode(partner.plan, input.mode);
      const [running] = await tx`SELECT 1 FROM sessions WHERE lesson_id = ${id} AND ended_at IS NULL`;
      if (running) throw Errors.sessionRunning();
    }
    const [l] = await tx<{ title: string; mode: LessonMode; subject_mode: SubjectMode }[]>`
      UPDATE lessons SET title = COALESCE(${input.title ?? null}, title),
                         subject_mode = COALESCE(${input.subject_mode ?? null}, subject_mode),
                         mode = COALESCE(${input.mode ?? null}, mode)
      WHERE id = ${id} RETURNING title, mode, subject_mode`;
    await tx`SELECT pg_notify(${LESSON_UPDATED_CHANNEL}, ${JSON.stringify({ lesson_id: id, ...l })})`;
    const [lesson] = await tx<Lesson[]>`SELECT * FROM lessons_billed WHERE id = ${id}`;
    return lesson;
  });
}

/**
 * Archives a lesson (DELETE); 404 for no such lesson, 410 when it was archived
 * already. Closing its sockets and charging its running session is the
 * gateway's part: it hears `lesson_archived`, sent by the statement that
 * archives (so it is sent if and only if the archive commits: gateways trust
 * it to drop the links they cached).
 */
export async function archiveLesson(db: Db, partnerId: string, id: string, at: Date): Promise<void> {
  const [archived] = await db<{ id: string }[]>`
    WITH archived AS (
      UPDATE lessons SET archived_at = ${at}
      WHERE id = ${id} AND partner_id = ${partnerId} AND archived_at IS NULL
      RETURNING id)
    SELECT archived.id FROM archived, pg_notify(${LESSON_ARCHIVED_CHANNEL}, archived.id)`;
  if (archived) return;
  await getLiveLesson((p, i) => findLesson(db, p, i), partnerId, id); // throws 404 or 410
  throw Errors.archived();
}

/** When the lesson was archived, or null while it is live (or unknown): the gateway's check on an archive notification. */
export async function lessonArchivedAt(db: Db, id: string): Promise<Date | null> {
  const [row] = await db<{ archived_at: Date | null }[]>`SELECT archived_at FROM lessons WHERE id = ${id}`;
  return row?.archived_at ?? null;
}
