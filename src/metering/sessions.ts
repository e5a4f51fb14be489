import type { Db, Sql } from '../db/index.js';
import { recordEvent } from '../events/outbox.js';
import { secondsToWholeMinutes } from '../domain/ledger.js';
import { lockLessonOfSession } from './charge.js';

export interface Session {
  id: number;
  lesson_id: string;
  partner_id: string;
  mode: 'full' | 'board_only';
  rate_percent: number;
  started_at: Date;
  ended_at: Date | null;
  seconds: number;
  charged_seconds: number;
  people_max: number;
}

/** Percent of a second deducted per metered second: full lessons 100, board-only lessons the partner's rate. */
export function ratePercentFor(mode: 'full' | 'board_only', boardRatePercent: number): number {
  return mode === 'full' ? 100 : boardRatePercent;
}

export async function getRunningSession(db: Db, lessonId: string): Promise<Session | undefined> {
  const [s] = await db<Session[]>`SELECT * FROM sessions WHERE lesson_id = ${lessonId} AND ended_at IS NULL`;
  return s;
}

/**
 * Two or more people are present: make sure a session is running. Creates it
 * (lessons.started_at set, ended_at cleared, `lesson.started` recorded) only
 * when none runs; the partial unique index sessions_one_running makes a
 * concurrent second start a no-op, so two gateway nodes never both start one.
 */
export async function ensureSessionStarted(
  sql: Sql,
  input: { lessonId: string; at: Date; people: number },
): Promise<{ session: Session; started: boolean }> {
  return sql.begin(async (tx) => {
    // Serialise starts and ends of one lesson (NO KEY UPDATE: see lockLessonOfSession).
    const [lesson] = await tx<{ id: string; partner_id: string; external_id: string | null; mode: Session['mode']; archived_at: Date | null; board_rate_percent: number }[]>`
      SELECT l.id, l.partner_id, l.external_id, l.mode, l.archived_at, p.board_rate_percent
      FROM lessons l JOIN partners p ON p.id = l.partner_id
      WHERE l.id = ${input.lessonId} FOR NO KEY UPDATE OF l`;
    if (!lesson) throw new Error(`lesson ${input.lessonId} not found`);
    const running = await getRunningSession(tx, input.lessonId);
    if (running) {
      if (input.people > running.people_max) {
        await tx`UPDATE sessions SET people_max = ${input.people} WHERE id = ${running.id}`;
        running.people_max = input.people;
      }
      return { session: running, started: false };
    }
    const [session] = await tx<Session[]>`
      INSERT INTO sessions (lesson_id, partner_id, mode, rate_percent, started_at, people_max)
      VALUES (${lesson.id}, ${lesson.partner_id}, ${lesson.mode}, ${ratePercentFor(lesson.mode, lesson.board_rate_percent)},
              ${input.at}, ${input.people})
      RETURNING *`;
    await tx`UPDATE lessons SET started_at = ${input.at}, ended_at = NULL WHERE id = ${lesson.id}`;
    await recordEvent(tx, lesson.partner_id, 'lesson.started', {
      lesson_id: lesson.id,
      external_id: lesson.external_id,
      started_at: input.at.toISOString(),
      ended_at: null,
      minutes: 0,
    }, input.at);
    return { session, started: true };
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
