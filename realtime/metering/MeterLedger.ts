import type { Sql } from '../../src/db/index.js';
import { lessonArchivedAt } from '../../src/domain/lessons.js';
import { recordMeteredTimeBatch, type MeteredItem } from '../../src/metering/charge.js';
import {
  archivedAmong,
  findArchivedRunning,
  findIdleSessions,
  findOrphanSessions,
  saveMeterSnapshots,
  type MeterSnapshot,
  type SweepCandidate,
} from '../../src/metering/meters.js';
import { endSession, ensureSessionsStarted, finishSession, type SessionStartInput, type SessionStartResult } from '../../src/metering/sessions.js';

/**
 * What the gateway's metering writes and reads of the durable ledger:
 * sessions, their watermark charges, the meters' snapshots, and what the
 * sweeps look for. Postgres in production (postgresLedger); InMemoryLedger
 * runs the gateway core without a database. Every write is idempotent (a
 * start adopts a running session, a charge is a watermark, an end ends once,
 * a snapshot never goes back in seq), so the Meter retries them freely.
 */
export interface MeterLedger {
  /** one result per input, in order; undefined: no such lesson, or archived at or before the input's moment */
  startSessions(inputs: SessionStartInput[]): Promise<(SessionStartResult | undefined)[]>;
  /** watermark charges, in one transaction */
  charge(items: MeteredItem[]): Promise<void>;
  endSession(input: { sessionId: number; endedAt: Date; at: Date }): Promise<{ ended: boolean }>;
  /** charge up to the final total, then end */
  finishSession(input: { sessionId: number; cumulativeSeconds: number; chargeAt: Date; endedAt: Date; at: Date }): Promise<{ ended: boolean }>;
  saveSnapshots(snaps: MeterSnapshot[]): Promise<void>;
  /** running sessions whose lesson has been empty since `cutoff` or earlier (the idle end) */
  idleSessions(cutoff: Date): Promise<SweepCandidate[]>;
  /** running sessions nobody vouched for since `staleBefore` and not known to be empty */
  orphanSessions(staleBefore: Date): Promise<SweepCandidate[]>;
  /** running sessions of archived lessons */
  archivedRunning(): Promise<SweepCandidate[]>;
  /** the archived lessons among `ids`, with their archived_at */
  archivedAmong(ids: string[]): Promise<Map<string, Date>>;
  archivedAt(lessonId: string): Promise<Date | null>;
}

/** The ledger in Postgres (src/metering/). */
export function postgresLedger(sql: Sql): MeterLedger {
  return {
    startSessions: (inputs) => ensureSessionsStarted(sql, inputs, { skipArchived: true }),
    charge: async (items) => void (await recordMeteredTimeBatch(sql, items)),
    endSession: (input) => endSession(sql, input),
    finishSession: (input) => finishSession(sql, input),
    saveSnapshots: (snaps) => saveMeterSnapshots(sql, snaps),
    idleSessions: (cutoff) => findIdleSessions(sql, cutoff),
    orphanSessions: (staleBefore) => findOrphanSessions(sql, staleBefore),
    archivedRunning: () => findArchivedRunning(sql),
    archivedAmong: (ids) => archivedAmong(sql, ids),
    archivedAt: (lessonId) => lessonArchivedAt(sql, lessonId),
  };
}
