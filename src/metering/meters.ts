import type { Db } from '../db/index.js';

/**
 * The durable shadow of a lesson's live meter (table lesson_meters,
 * migrations/006_realtime.sql). The live meter is decided in Redis by the
 * gateway; this is what the idle sweeper, the orphan sweeper and a re-seed
 * after a Redis flush read (docs/metering.md).
 */
export interface MeterSnapshot {
  lessonId: string;
  seq: number;
  sessionId: number | null;
  /** metered ms of the session before runningSince */
  accMs: number;
  runningSince: Date | null;
  emptySince: Date | null;
  people: number;
  /** when the node wrote it (heartbeat_at) */
  at: Date;
}

/**
 * Writes snapshots in one statement. A row only moves forward: a write whose
 * seq is older than the stored one (it was overtaken by another node's newer
 * transition) changes nothing.
 */
export async function saveMeterSnapshots(db: Db, snaps: MeterSnapshot[]): Promise<void> {
  if (snaps.length === 0) return;
  // one row per lesson: the newest wins inside the batch too
  const byLesson = new Map<string, MeterSnapshot>();
  for (const s of snaps) {
    const prev = byLesson.get(s.lessonId);
    if (!prev || prev.seq <= s.seq) byLesson.set(s.lessonId, s);
  }
  // in lesson order, as the session start's transaction writes them under its lesson locks: two
  // writers meeting on the same rows wait for each other instead of deadlocking
  const rows = [...byLesson.values()].sort((a, b) => (a.lessonId < b.lessonId ? -1 : a.lessonId > b.lessonId ? 1 : 0));
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  // a column per array (unnest), not a parameter per value: a node's flush refreshes thousands of rows
  await db`
    INSERT INTO lesson_meters (lesson_id, seq, session_id, acc_ms, running_since, empty_since, people, heartbeat_at)
    SELECT * FROM unnest(
      ${rows.map((r) => r.lessonId)}::text[], ${rows.map((r) => r.seq)}::bigint[], ${rows.map((r) => r.sessionId)}::bigint[],
      ${rows.map((r) => Math.round(r.accMs))}::bigint[], ${rows.map((r) => iso(r.runningSince))}::timestamptz[],
      ${rows.map((r) => iso(r.emptySince))}::timestamptz[], ${rows.map((r) => r.people)}::int[], ${rows.map((r) => r.at.toISOString())}::timestamptz[])
    ON CONFLICT (lesson_id) DO UPDATE SET
      seq = EXCLUDED.seq, session_id = EXCLUDED.session_id, acc_ms = EXCLUDED.acc_ms,
      running_since = EXCLUDED.running_since, empty_since = EXCLUDED.empty_since,
      people = EXCLUDED.people, heartbeat_at = EXCLUDED.heartbeat_at
    WHERE lesson_meters.seq <= EXCLUDED.seq`;
}

/** What Redis is seeded with when it has no meter for a lesson (first use, or after a flush). */
export interface MeterSeed {
  seq: number;
  sessionId: number | null;
  accMs: number;
  runningSince: Date | null;
  emptySince: Date | null;
  /** last heartbeat of the snapshot (or the session start): the last moment presence was confirmed */
  confirmedAt: Date | null;
}

interface SeedRow {
  running_id: number | null;
  running_seconds: number | null;
  running_started_at: Date | null;
  seq: number | null;
  session_id: number | null;
  acc_ms: number | null;
  running_since: Date | null;
  empty_since: Date | null;
  heartbeat_at: Date | null;
}

/**
 * The meter of a lesson as Postgres knows it. The running session row is the
 * authority on which session is live; the snapshot adds whether it was
 * metering and since when. Undefined when the lesson does not exist.
 */
export async function readMeterSeed(db: Db, lessonId: string): Promise<MeterSeed | undefined> {
  return (await readMeterSeeds(db, [lessonId]))[0];
}

/** readMeterSeed for many lessons in one statement (the gateway batches the seeds of a burst of arrivals); in order. */
export async function readMeterSeeds(db: Db, lessonIds: string[]): Promise<(MeterSeed | undefined)[]> {
  if (lessonIds.length === 0) return [];
  const rows = await db<(SeedRow & { lesson_id: string })[]>`
    SELECT l.id AS lesson_id, s.id AS running_id, s.seconds AS running_seconds, s.started_at AS running_started_at,
           m.seq, m.session_id, m.acc_ms, m.running_since, m.empty_since, m.heartbeat_at
    FROM lessons l
    LEFT JOIN sessions s ON s.lesson_id = l.id AND s.ended_at IS NULL
    LEFT JOIN lesson_meters m ON m.lesson_id = l.id
    WHERE l.id = ANY(${[...new Set(lessonIds)]}::text[])`;
  const byLesson = new Map(rows.map((r) => [r.lesson_id, r]));
  return lessonIds.map((id) => {
    const row = byLesson.get(id);
    return row ? seedFromRow(row) : undefined;
  });
}

export function seedFromRow(row: SeedRow): MeterSeed {
  const seq = row.seq ?? 0;
  if (row.running_id === null) {
    return { seq, sessionId: null, accMs: 0, runningSince: null, emptySince: null, confirmedAt: null };
  }
  const watermarkMs = (row.running_seconds ?? 0) * 1000;
  if (row.session_id === row.running_id) {
    // While running, acc_ms + (now - running_since) already covers the flushed watermark.
    const accMs = row.running_since ? (row.acc_ms ?? 0) : Math.max(row.acc_ms ?? 0, watermarkMs);
    return {
      seq,
      sessionId: row.running_id,
      accMs,
      runningSince: row.running_since,
      emptySince: row.empty_since,
      confirmedAt: row.heartbeat_at,
    };
  }
  // No snapshot names the running session: a session from before its start wrote one in its own
  // transaction (SessionStartInput.meter). Start from its watermark, paused.
  return { seq, sessionId: row.running_id, accMs: watermarkMs, runningSince: null, emptySince: null, confirmedAt: row.running_started_at };
}

export interface SweepCandidate {
  lessonId: string;
  sessionId: number;
  /** idle: when the lesson became empty; orphan: last confirmed presence; archived: archived_at */
  since: Date;
  archived: boolean;
}

/** Running sessions whose lesson has been empty since `cutoff` (now - SESSION_IDLE_SECONDS: the idle end, src/metering/rules.ts) or earlier. */
export async function findIdleSessions(db: Db, cutoff: Date, limit = 500): Promise<SweepCandidate[]> {
  const rows = await db<{ lesson_id: string; session_id: number; empty_since: Date }[]>`
    SELECT m.lesson_id, m.session_id, m.empty_since
    FROM lesson_meters m JOIN sessions s ON s.id = m.session_id AND s.ended_at IS NULL
    WHERE m.empty_since IS NOT NULL AND m.session_id IS NOT NULL AND m.empty_since <= ${cutoff}
    ORDER BY m.empty_since LIMIT ${limit}`;
  return rows.map((r) => ({ lessonId: r.lesson_id, sessionId: r.session_id, since: r.empty_since, archived: false }));
}

/**
 * The orphan rule (src/metering/rules.ts orphanMs; `staleBefore` = now - orphanMs).
 * Running sessions that no gateway node has vouched for since `staleBefore`
 * and that are not known to be empty: every process that held them died
 * (or Redis and the processes were lost together).
 */
export async function findOrphanSessions(db: Db, staleBefore: Date, limit = 500): Promise<SweepCandidate[]> {
  const rows = await db<{ lesson_id: string; session_id: number; confirmed_at: Date }[]>`
    SELECT s.lesson_id, s.id AS session_id, coalesce(m.heartbeat_at, s.started_at) AS confirmed_at
    FROM sessions s LEFT JOIN lesson_meters m ON m.lesson_id = s.lesson_id
    WHERE s.ended_at IS NULL AND m.empty_since IS NULL
      AND coalesce(m.heartbeat_at, s.started_at) < ${staleBefore}
    ORDER BY 3 LIMIT ${limit}`;
  return rows.map((r) => ({ lessonId: r.lesson_id, sessionId: r.session_id, since: r.confirmed_at, archived: false }));
}

/** Running sessions of archived lessons (a gateway missed or never heard the archive notification). */
export async function findArchivedRunning(db: Db, limit = 500): Promise<SweepCandidate[]> {
  const rows = await db<{ lesson_id: string; session_id: number; archived_at: Date }[]>`
    SELECT s.lesson_id, s.id AS session_id, l.archived_at
    FROM sessions s JOIN lessons l ON l.id = s.lesson_id
    WHERE s.ended_at IS NULL AND l.archived_at IS NOT NULL
    LIMIT ${limit}`;
  return rows.map((r) => ({ lessonId: r.lesson_id, sessionId: r.session_id, since: r.archived_at, archived: true }));
}

/** Lessons among `ids` that are archived. */
export async function archivedAmong(db: Db, ids: string[]): Promise<Map<string, Date>> {
  if (ids.length === 0) return new Map();
  const rows = await db<{ id: string; archived_at: Date }[]>`
    SELECT id, archived_at FROM lessons WHERE id = ANY(${ids}::text[]) AND archived_at IS NOT NULL`;
  return new Map(rows.map((r) => [r.id, r.archived_at]));
}
