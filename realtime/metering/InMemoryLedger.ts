import type { PresenceMark } from '../../src/domain/attendance.js';
import { chargedFor, type MeteredItem } from '../../src/metering/charge.js';
import { seedFromRow, type MeterSeed, type MeterSnapshot, type SweepCandidate } from '../../src/metering/meters.js';
import { PARTICIPANT_JOINED_WINDOW_MS } from '../../src/metering/rules.js';
import type { ParticipantJoin } from '../../src/metering/participants.js';
import type { Session, SessionStartInput, SessionStartResult } from '../../src/metering/sessions.js';
import type { MeterLedger } from './MeterLedger.js';

/**
 * What the gateway writes to Postgres, kept in the process: the meter's
 * ledger (sessions, watermark charges, snapshots, the sweeps' reads),
 * participant.joined under the 6-hour rule and the presence marks. It runs
 * the gateway core without a database (memoryParts, realtime/parts.ts) and
 * follows the statements' rules as the core relies on them: a start adopts a
 * running session, a charge only moves a watermark up, an end ends once, a
 * snapshot never goes back in seq. Every lesson exists, charged at the full
 * rate; an archive is `archive()`.
 */
export class InMemoryLedger implements MeterLedger {
  private readonly sessions: Session[] = [];
  private readonly snapshots = new Map<string, MeterSnapshot>();
  private readonly archived = new Map<string, Date>();
  /** lesson and person -> the last participant.joined recorded */
  private readonly lastJoined = new Map<string, number>();
  /** participant.joined recorded, in order */
  readonly joins: ParticipantJoin[] = [];
  readonly marks: PresenceMark[] = [];
  /** charges and snapshots written (figures for tests: what a flush skips) */
  readonly written = { charges: 0, snapshots: 0 };

  async startSessions(inputs: SessionStartInput[]): Promise<(SessionStartResult | undefined)[]> {
    return inputs.map((input) => {
      const archivedAt = this.archived.get(input.lessonId);
      if (archivedAt && archivedAt <= input.at) return undefined;
      const running = this.running(input.lessonId);
      if (running) return { session: { ...running }, started: false };
      const session: Session = {
        id: this.sessions.length + 1,
        lesson_id: input.lessonId,
        partner_id: '',
        mode: 'full',
        rate_percent: 100,
        started_at: input.at,
        ended_at: null,
        seconds: 0,
        charged_seconds: 0,
        people_max: input.people,
      };
      this.sessions.push(session);
      if (input.meter) this.save({ ...input.meter, lessonId: input.lessonId, sessionId: session.id });
      return { session: { ...session }, started: true };
    });
  }

  async charge(items: MeteredItem[]): Promise<void> {
    this.written.charges += items.length;
    for (const item of items) {
      const s = this.sessions[item.sessionId - 1];
      if (!s) continue;
      const archivedAt = this.archived.get(s.lesson_id);
      if (item.unlessArchived && archivedAt && archivedAt < item.at) continue;
      s.seconds = Math.max(s.seconds, item.cumulativeSeconds);
      s.charged_seconds = Math.max(s.charged_seconds, chargedFor(s.seconds, s.rate_percent));
      s.people_max = Math.max(s.people_max, item.people ?? 0);
    }
  }

  async endSession(input: { sessionId: number; endedAt: Date; at: Date }): Promise<{ ended: boolean }> {
    const s = this.sessions[input.sessionId - 1];
    if (!s || s.ended_at) return { ended: false };
    s.ended_at = input.endedAt > s.started_at ? input.endedAt : s.started_at;
    return { ended: true };
  }

  async finishSession(input: { sessionId: number; cumulativeSeconds: number; chargeAt: Date; endedAt: Date; at: Date }): Promise<{ ended: boolean }> {
    await this.charge([{ sessionId: input.sessionId, cumulativeSeconds: input.cumulativeSeconds, at: input.chargeAt }]);
    return this.endSession(input);
  }

  async saveSnapshots(snaps: MeterSnapshot[]): Promise<void> {
    this.written.snapshots += snaps.length;
    for (const s of snaps) this.save(s);
  }

  async idleSessions(cutoff: Date): Promise<SweepCandidate[]> {
    const out: SweepCandidate[] = [];
    for (const m of this.snapshots.values()) {
      const s = m.sessionId === null ? undefined : this.sessions[m.sessionId - 1];
      if (s && !s.ended_at && m.emptySince && m.emptySince <= cutoff) out.push({ lessonId: m.lessonId, sessionId: s.id, since: m.emptySince, archived: false });
    }
    return out.sort((a, b) => a.since.getTime() - b.since.getTime());
  }

  async orphanSessions(staleBefore: Date): Promise<SweepCandidate[]> {
    const out: SweepCandidate[] = [];
    for (const s of this.sessions) {
      const m = this.snapshots.get(s.lesson_id);
      const confirmed = m?.at ?? s.started_at;
      if (!s.ended_at && !m?.emptySince && confirmed < staleBefore) out.push({ lessonId: s.lesson_id, sessionId: s.id, since: confirmed, archived: false });
    }
    return out.sort((a, b) => a.since.getTime() - b.since.getTime());
  }

  async archivedRunning(): Promise<SweepCandidate[]> {
    const out: SweepCandidate[] = [];
    for (const s of this.sessions) {
      const at = this.archived.get(s.lesson_id);
      if (!s.ended_at && at) out.push({ lessonId: s.lesson_id, sessionId: s.id, since: at, archived: true });
    }
    return out;
  }

  async archivedAmong(ids: string[]): Promise<Map<string, Date>> {
    const out = new Map<string, Date>();
    for (const id of ids) {
      const at = this.archived.get(id);
      if (at) out.set(id, at);
    }
    return out;
  }

  async archivedAt(lessonId: string): Promise<Date | null> {
    return this.archived.get(lessonId) ?? null;
  }

  /** The lesson is deleted (DELETE /lessons/{id}). */
  archive(lessonId: string, at: Date): void {
    this.archived.set(lessonId, at);
  }

  /** What a node seeds a lesson's meter with (readMeterSeeds). */
  async seed(lessonId: string): Promise<MeterSeed> {
    const s = this.running(lessonId);
    const m = this.snapshots.get(lessonId);
    return seedFromRow({
      running_id: s?.id ?? null,
      running_seconds: s?.seconds ?? null,
      running_started_at: s?.started_at ?? null,
      seq: m?.seq ?? null,
      session_id: m?.sessionId ?? null,
      acc_ms: m?.accMs ?? null,
      running_since: m?.runningSince ?? null,
      empty_since: m?.emptySince ?? null,
      heartbeat_at: m?.at ?? null,
    });
  }

  /** recordParticipantsJoined: one event per person and lesson in any 6 hours. */
  async recordJoins(batch: ParticipantJoin[]): Promise<void> {
    for (const j of batch) {
      const key = `${j.lessonId} ${j.userHash}`;
      const last = this.lastJoined.get(key);
      if (last !== undefined && last > j.at.getTime() - PARTICIPANT_JOINED_WINDOW_MS) continue;
      this.lastJoined.set(key, j.at.getTime());
      this.joins.push(j);
    }
  }

  /** recordPresenceMarks */
  async recordMarks(batch: PresenceMark[]): Promise<void> {
    this.marks.push(...batch);
  }

  /** The lesson's sessions, oldest first (as sessionsOf reads them). */
  sessionsOf(lessonId: string): Session[] {
    return this.sessions.filter((s) => s.lesson_id === lessonId).map((s) => ({ ...s }));
  }

  /** Balance seconds the lesson's sessions charged (lessons_billed.billed_seconds). */
  billedSeconds(lessonId: string): number {
    return this.sessionsOf(lessonId).reduce((sum, s) => sum + s.charged_seconds, 0);
  }

  private running(lessonId: string): Session | undefined {
    return this.sessions.find((s) => s.lesson_id === lessonId && !s.ended_at);
  }

  private save(snap: MeterSnapshot): void {
    const prev = this.snapshots.get(snap.lessonId);
    if (!prev || prev.seq <= snap.seq) this.snapshots.set(snap.lessonId, { ...snap });
  }
}
