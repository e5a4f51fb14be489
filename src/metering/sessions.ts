import type { Sql } from '../db/index.js';
import { recordEvent, recordEvents } from '../events/outbox.js';
import { secondsToWholeMinutes } from '../domain/ledger.js';
import { lockLessonOfSession, recordMeteredTime } from './charge.js';
import type { LessonMode } from '../domain/enums.js';
import { saveMeterSnapshots, type MeterSnapshot } from './meters.js';

export interface Session {
  id: number;
  lesson_id: string;
  partner_id: string;
  mode: LessonMode;
  rate_percent: number;
  started_at: Date;
  ended_at: Date | null;
  seconds: number;
  charged_seconds: number;
  people_max: number;
}

/** Percent of a second deducted per metered second: full lessons 100, board-only lessons the partner's rate. */
export function ratePercentFor(mode: LessonMode, boardRatePercent: number): number {
  return mode === 'full' ? 100 : boardRatePercent;
}

export interface SessionStartInput {
  lessonId: string;
  at: Date;
  people: number;
  /**
   * The live meter at the start (the gateway's), written as the lesson's
   * snapshot in the transaction that creates the session: Postgres never holds
   * a running session that no snapshot names. Were Redis lost between this
   * commit and the gateway binding the session there, the meter rebuilt from
   * Postgres would not know whether the session ran, and would bill only what
   * followed the rebuild (readMeterSeed). Not written when the lesson's
   * session already runs (adopted: its own snapshots name it).
   */
  meter?: Omit<MeterSnapshot, 'lessonId' | 'sessionId'>;
}

export interface SessionStartResult {
  session: Session;
  started: boolean;
}

/**
 * Two or more people are present: make sure a session is running. Creates it
 * (lessons.started_at set, ended_at cleared, `lesson.started` recorded) only
 * when none runs; the partial unique index sessions_one_running makes a
 * concurrent second start a no-op, so two gateway nodes never both start one.
 */
export async function ensureSessionStarted(sql: Sql, input: SessionStartInput): Promise<SessionStartResult> {
  const [r] = await ensureSessionsStarted(sql, [input]);
  if (!r) throw new Error(`lesson ${input.lessonId} not found`);
  return r;
}

/**
 * ensureSessionStarted for many lessons in one transaction (the gateway
 * batches the starts of a burst of arrivals): the statements are the same
 * for 1 or 200 lessons. One result per input, in order: undefined for a
 * lesson that does not exist, or, when `skipArchived`, was archived at or
 * before the input's moment (a deleted lesson starts no session; one that ran
 * before its deletion does, and is ended at archived_at by the gateway; the
 * check is under the lesson's lock).
 * A lesson given twice starts once; its later inputs adopt that session.
 */
export async function ensureSessionsStarted(
  sql: Sql,
  inputs: SessionStartInput[],
  opts: { skipArchived?: boolean } = {},
): Promise<(SessionStartResult | undefined)[]> {
  if (inputs.length === 0) return [];
  const ids = [...new Set(inputs.map((i) => i.lessonId))].sort();
  return sql.begin(async (tx) => {
    // Serialise starts and ends of these lessons (NO KEY UPDATE: see
    // lockLessonOfSession), in id order like the batch charge, so batches
    // cannot deadlock on each other. Issued together, the two reads go out in
    // one write and run in this order (after the locks).
    const [lessons, running] = await Promise.all([
      tx<{ id: string; partner_id: string; external_id: string | null; mode: Session['mode']; archived_at: Date | null; board_rate_percent: number }[]>`
        SELECT l.id, l.partner_id, l.external_id, l.mode, l.archived_at, p.board_rate_percent
        FROM lessons l JOIN partners p ON p.id = l.partner_id
        WHERE l.id = ANY(${ids}::text[]) ORDER BY l.id FOR NO KEY UPDATE OF l`,
      tx<Session[]>`SELECT * FROM sessions WHERE lesson_id = ANY(${ids}::text[]) AND ended_at IS NULL`,
    ]);
    const lessonById = new Map(lessons.map((l) => [l.id, l]));
    const runningByLesson = new Map(running.map((s) => [s.lesson_id, s]));
    const admitted = (input: SessionStartInput) => {
      const lesson = lessonById.get(input.lessonId);
      return lesson !== undefined && !(opts.skipArchived && lesson.archived_at && lesson.archived_at <= input.at);
    };
    // per lesson: its first input (the one that starts it when nothing runs) and the most people any input saw
    const wanted = new Map<string, { first: SessionStartInput; people: number }>();
    for (const input of inputs) {
      if (!admitted(input)) continue;
      const w = wanted.get(input.lessonId);
      if (w) w.people = Math.max(w.people, input.people);
      else wanted.set(input.lessonId, { first: input, people: input.people });
    }
    const toStart = [...wanted.values()]
      .filter((w) => !runningByLesson.has(w.first.lessonId))
      .map((w) => ({ input: w.first, people: w.people, lesson: lessonById.get(w.first.lessonId)! }));
    const raise = [...wanted.values()]
      .filter((w) => w.people > (runningByLesson.get(w.first.lessonId)?.people_max ?? Infinity))
      .map((w) => [w.first.lessonId, w.people] as const);
    // Running sessions are locked in id order, as a batch charge locks them, before the UPDATE takes
    // them in whatever order its join gives: a charge of the same sessions deadlocked with it.
    const raiseIds = raise.map(([l]) => runningByLesson.get(l)!.id).sort((a, b) => a - b);
    const [created] = await Promise.all([
      toStart.length === 0
        ? Promise.resolve([] as Session[])
        : tx<Session[]>`
            INSERT INTO sessions (lesson_id, partner_id, mode, rate_percent, started_at, people_max)
            SELECT * FROM unnest(${toStart.map((s) => s.lesson.id)}::text[], ${toStart.map((s) => s.lesson.partner_id)}::text[],
                                 ${toStart.map((s) => s.lesson.mode)}::text[],
                                 ${toStart.map((s) => ratePercentFor(s.lesson.mode, s.lesson.board_rate_percent))}::int[],
                                 ${toStart.map((s) => s.input.at.toISOString())}::timestamptz[], ${toStart.map((s) => s.people)}::int[])
            RETURNING *`,
      toStart.length === 0
        ? Promise.resolve()
        : tx`
            UPDATE lessons l SET started_at = x.at, ended_at = NULL
            FROM unnest(${toStart.map((s) => s.lesson.id)}::text[], ${toStart.map((s) => s.input.at.toISOString())}::timestamptz[]) AS x(id, at)
            WHERE l.id = x.id`,
      raise.length === 0
        ? Promise.resolve()
        : tx`SELECT 1 FROM sessions WHERE id = ANY(${raiseIds}::bigint[]) ORDER BY id FOR NO KEY UPDATE`.then(
            () => tx`
            UPDATE sessions s SET people_max = x.p
            FROM unnest(${raise.map(([l]) => runningByLesson.get(l)!.id)}::bigint[], ${raise.map(([, p]) => p)}::int[]) AS x(id, p)
            WHERE s.id = x.id AND s.people_max < x.p`,
          ),
    ]);
    for (const [lessonId, p] of raise) runningByLesson.get(lessonId)!.people_max = p;
    const createdByLesson = new Map(created.map((s) => [s.lesson_id, s]));
    await Promise.all([
      recordEvents(
        tx,
        toStart.map(({ input, lesson }) => ({
          partnerId: lesson.partner_id,
          type: 'lesson.started' as const,
          data: { lesson_id: lesson.id, external_id: lesson.external_id, started_at: input.at.toISOString(), ended_at: null, minutes: 0 },
          at: input.at,
        })),
      ),
      saveMeterSnapshots(
        tx,
        toStart.flatMap(({ input }) =>
          input.meter ? [{ ...input.meter, lessonId: input.lessonId, sessionId: createdByLesson.get(input.lessonId)!.id }] : [],
        ),
      ),
    ]);
    return inputs.map((input) => {
      if (!admitted(input)) return undefined;
      const run = runningByLesson.get(input.lessonId);
      if (run) return { session: run, started: false };
      return { session: createdByLesson.get(input.lessonId)!, started: wanted.get(input.lessonId)!.first === input };
    });
  });
}

/**
 * Ends a running session: `endedAt` is the moment the lesson became empty (or
 * was archived), `at` the moment the end was decided (the event's created_at).
 * Charge the metered time first (recordMeteredTime); this only closes.
 * Idempotent: ending an ended session does nothing and records no event.
 */
export async function endSession(
  sql: Sql,
  input: { sessionId: number; endedAt: Date; at: Date },
): Promise<{ ended: boolean; session?: Session }> {
  return sql.begin(async (tx) => {
    await lockLessonOfSession(tx, input.sessionId);
    const [session] = await tx<Session[]>`
      UPDATE sessions SET ended_at = greatest(started_at, ${input.endedAt}::timestamptz)
      WHERE id = ${input.sessionId} AND ended_at IS NULL RETURNING *`;
    if (!session) return { ended: false };
    const [lesson] = await tx<{ external_id: string | null }[]>`
      UPDATE lessons SET ended_at = ${session.ended_at} WHERE id = ${session.lesson_id} RETURNING external_id`;
    await recordEvent(tx, session.partner_id, 'lesson.ended', {
      lesson_id: session.lesson_id,
      external_id: lesson.external_id,
      started_at: session.started_at.toISOString(),
      ended_at: session.ended_at!.toISOString(),
      minutes: secondsToWholeMinutes(session.seconds),
      mode: session.mode,
    }, input.at);
    return { ended: true, session };
  });
}

/**
 * Ends a session after charging it up to its final total: charge first
 * (a watermark, so a replay charges nothing), then end (idempotent, one
 * lesson.ended). Safe to call from several nodes at once.
 */
export async function finishSession(
  sql: Sql,
  input: { sessionId: number; cumulativeSeconds: number; chargeAt: Date; endedAt: Date; at: Date },
): Promise<{ ended: boolean }> {
  await recordMeteredTime(sql, { sessionId: input.sessionId, cumulativeSeconds: input.cumulativeSeconds, at: input.chargeAt });
  const { ended } = await endSession(sql, { sessionId: input.sessionId, endedAt: input.endedAt, at: input.at });
  return { ended };
}
