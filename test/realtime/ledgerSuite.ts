import { describe, expect, it } from 'vitest';
import type { MeterSnapshot } from '../../src/metering/meters.js';
import type { MeterLedger } from '../../realtime/metering/MeterLedger.js';

/** One MeterLedger under test, with what the suite needs around it. */
export interface LedgerHarness {
  ledger: MeterLedger;
  /** a new lesson (a partner's, with enough balance) */
  lesson(): Promise<string>;
  /** DELETE /lessons/{id} at `at` */
  archive(lessonId: string, at: Date): Promise<void>;
  /** the lesson's sessions, oldest first */
  sessions(lessonId: string): Promise<{ id: number; started_at: Date; ended_at: Date | null; seconds: number; charged_seconds: number }[]>;
}

const T = new Date('2026-03-10T09:00:00Z').getTime();
const at = (s: number) => new Date(T + s * 1000);
const snap = (lessonId: string, seq: number, o: Partial<MeterSnapshot> = {}): MeterSnapshot => ({
  lessonId,
  seq,
  sessionId: null,
  accMs: 0,
  runningSince: null,
  emptySince: null,
  people: 2,
  at: at(0),
  ...o,
});

/**
 * The MeterLedger contract (realtime/metering/MeterLedger.ts), run against
 * Postgres and InMemoryLedger: what the Meter, Maintenance and the archive
 * handling rely on. That both pass it is what lets the gateway core's unit
 * tests (memoryParts) stand for the production ledger.
 */
export function ledgerSuite(name: string, harness: () => LedgerHarness): void {
  describe(`the meter's ledger (${name})`, () => {
    it('starts one session per lesson: a second start adopts it, a lesson archived at or before the start gets none', async () => {
      const { ledger, lesson, archive, sessions } = harness();
      const [l, gone] = [await lesson(), await lesson()];
      await archive(gone, at(0));
      const [first, none] = await ledger.startSessions([
        { lessonId: l, at: at(0), people: 2 },
        { lessonId: gone, at: at(0), people: 2 },
      ]);
      expect(first).toMatchObject({ started: true });
      expect(none).toBeUndefined();
      const [again] = await ledger.startSessions([{ lessonId: l, at: at(5), people: 3 }]);
      expect(again).toMatchObject({ started: false, session: { id: first!.session.id } });
      expect(await sessions(l)).toHaveLength(1);
      expect(await sessions(gone)).toEqual([]);
    });

    it('charges a watermark: a lower or repeated charge changes nothing; one marked unlessArchived after the deletion charges nothing', async () => {
      const { ledger, lesson, archive, sessions } = harness();
      const l = await lesson();
      const [r] = await ledger.startSessions([{ lessonId: l, at: at(0), people: 2 }]);
      const id = r!.session.id;
      await ledger.charge([{ sessionId: id, cumulativeSeconds: 30, at: at(30) }]);
      await ledger.charge([{ sessionId: id, cumulativeSeconds: 30, at: at(30) }]);
      await ledger.charge([{ sessionId: id, cumulativeSeconds: 20, at: at(40) }]);
      expect(await sessions(l)).toMatchObject([{ seconds: 30, charged_seconds: 30 }]);
      await archive(l, at(50));
      await ledger.charge([{ sessionId: id, cumulativeSeconds: 60, at: at(60), unlessArchived: true }]);
      expect(await sessions(l)).toMatchObject([{ seconds: 30 }]);
      expect(await ledger.archivedAt(l)).toEqual(at(50));
      expect([...(await ledger.archivedAmong([l, await lesson()])).keys()]).toEqual([l]);
      expect((await ledger.archivedRunning()).filter((c) => c.lessonId === l)).toEqual([{ lessonId: l, sessionId: id, since: at(50), archived: true }]);
    });

    it('ends a session once, never before its start; finishing charges up to the final total first', async () => {
      const { ledger, lesson, sessions } = harness();
      const [a, b] = [await lesson(), await lesson()];
      const [ra, rb] = await ledger.startSessions([
        { lessonId: a, at: at(10), people: 2 },
        { lessonId: b, at: at(0), people: 2 },
      ]);
      expect(await ledger.endSession({ sessionId: ra!.session.id, endedAt: at(5), at: at(100) })).toMatchObject({ ended: true });
      expect(await ledger.endSession({ sessionId: ra!.session.id, endedAt: at(50), at: at(100) })).toEqual({ ended: false });
      expect(await sessions(a)).toMatchObject([{ started_at: at(10), ended_at: at(10) }]);
      expect(await ledger.finishSession({ sessionId: rb!.session.id, cumulativeSeconds: 42, chargeAt: at(42), endedAt: at(42), at: at(100) })).toEqual({ ended: true });
      expect(await sessions(b)).toMatchObject([{ seconds: 42, ended_at: at(42) }]);
      // a new start after the end is a new session
      const [again] = await ledger.startSessions([{ lessonId: b, at: at(200), people: 2 }]);
      expect(again).toMatchObject({ started: true });
      expect(await sessions(b)).toHaveLength(2);
    });

    it('keeps the newest snapshot by seq, and finds the sessions idle since a cutoff and the orphans nobody vouched for since one', async () => {
      const { ledger, lesson } = harness();
      const [idle, orphan, live] = [await lesson(), await lesson(), await lesson()];
      const started = await ledger.startSessions([idle, orphan, live].map((lessonId) => ({ lessonId, at: at(0), people: 2 })));
      const [si, so, sl] = started.map((r) => r!.session.id);
      await ledger.saveSnapshots([snap(idle, 3, { sessionId: si, emptySince: at(60), at: at(60) })]);
      // an older seq arriving late changes nothing
      await ledger.saveSnapshots([snap(idle, 2, { sessionId: si, emptySince: null, at: at(70) })]);
      await ledger.saveSnapshots([snap(orphan, 2, { sessionId: so, runningSince: at(0), at: at(10) }), snap(live, 2, { sessionId: sl, runningSince: at(0), at: at(200) })]);
      const mine = (cs: { lessonId: string }[]) => cs.filter((c) => [idle, orphan, live].includes(c.lessonId));
      expect(mine(await ledger.idleSessions(at(59)))).toEqual([]);
      expect(mine(await ledger.idleSessions(at(60)))).toEqual([{ lessonId: idle, sessionId: si, since: at(60), archived: false }]);
      expect(mine(await ledger.orphanSessions(at(100)))).toEqual([{ lessonId: orphan, sessionId: so, since: at(10), archived: false }]);
      await ledger.endSession({ sessionId: si, endedAt: at(60), at: at(400) });
      expect(mine(await ledger.idleSessions(at(400)))).toEqual([]);
    });
  });
}
