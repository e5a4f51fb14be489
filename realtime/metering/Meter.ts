import type { Logger } from '../../src/logger.js';
import type { MeteredItem } from '../../src/metering/charge.js';
import type { MeterSnapshot } from '../../src/metering/meters.js';
import type { SessionStartInput, SessionStartResult } from '../../src/metering/sessions.js';
import { Batcher } from '../../src/lib/Batcher.js';
import { KeyedQueue } from '../lib/KeyedQueue.js';
import { withRetry } from '../../src/lib/retry.js';
import { causedByInput, writeSplitting } from '../../src/db/errors.js';
import type { MeterLedger } from './MeterLedger.js';
import { SnapshotWriter } from './SnapshotWriter.js';
import { METERED_PEOPLE } from '../../src/metering/rules.js';
import type { Change, MeterState, Presence, TickResult } from '../presence/Presence.js';
import { accOf, assertNever, meteredSeconds, pausedAtOf, runningSince, sessionOf, type PendingEnd, type Starting } from '../presence/MeterMachine.js';

/** Sessions charged per flush transaction (Maintenance ticks and charges this many lessons at a time). */
export const FLUSH_BATCH = 500;
/**
 * Session starts of many lessons share one transaction: a class arriving
 * starts hundreds of sessions a second, each about ten round trips alone.
 * Collected for START_BATCH_MS (the start time is the moment Redis decided,
 * not the moment of the write, so the wait changes no figure).
 */
const START_BATCH_MS = 5;
const START_BATCH_MAX = 200;
/**
 * The charges at a pause of many lessons share one transaction the same way: a
 * class leaving pauses hundreds of meters a second, and a charge alone is a
 * transaction of eight statements that locks its partner's row (one by one, a
 * saturated fleet of 100,000 still had them unwritten 105 s after a class
 * left). A charge is a watermark dated when the meter paused, so
 * the wait changes no figure; the lesson's queue waits for its batch to commit.
 */
const PAUSE_BATCH_MS = 50;
/**
 * Every effect is idempotent (start, watermark charge, end, seq-ordered
 * snapshot), so a failed one (a lost connection, a lock timeout) is simply
 * run again after these waits (ms).
 */
const RETRY_WAITS = [100, 500, 2000, 5000];

/** The waits (ms) between a failed effect's attempts: RETRY_WAITS unless a test shortens them. */
export type MeterRetries = readonly number[];

/**
 * What the Meter remembers of a lesson open on this node, to skip flush writes that would change
 * nothing. Its Lesson holds it (Meter.marksOf), so it goes when the lesson closes here, however
 * late the lesson's last effects run.
 */
export interface MeterMarks {
  /** the seq and time of the last snapshot this node wrote */
  snapshot?: { seq: number; at: number };
  /** the session this node last charged, and up to how many seconds */
  charged?: { sessionId: number; seconds: number };
}

/**
 * Turns the meter transitions decided in Redis into ledger writes (Postgres: MeterLedger.ts): session
 * start (lesson.started), charges at every pause and every flush (a
 * watermark: replays and other nodes charge nothing twice), session end
 * (lesson.ended), and the durable snapshot (lesson_meters). Work for one
 * lesson runs in the order Redis decided it; lessons run in parallel.
 */
export class Meter {
  private readonly queue: KeyedQueue;
  /** the marks of a lesson open on this node (held by its Lesson: the Gateway sets this); none for the others */
  marksOf: (lessonId: string) => MeterMarks | undefined = () => undefined;
  /** a lesson's charge or snapshot Postgres refuses for good was left out of its batch (the gateway counts it) */
  onRefused: ((what: 'meter charge' | 'meter snapshot') => void) | undefined;
  private readonly snapshots: SnapshotWriter;
  private readonly starts: Batcher<SessionStartInput, SessionStartResult | undefined>;
  private readonly pauses: Batcher<MeteredItem>;
  /**
   * Lessons whose pending start this node could not write (Postgres away past RETRY_WAITS) or
   * must make for a deletion (archive): Redis retries a pending start only in the ticks of a node
   * serving the lesson, and if everyone left meanwhile none does. Maintenance ticks these too,
   * until their meter is no longer `starting` (startSettled). Each is also listed in Redis
   * (Presence.keepPendingStart) and every node ticks that list: a node that dies with a start it
   * gave up takes no retry with it. Kept here as well, for a Redis that refuses the listing.
   */
  private readonly unstarted = new Set<string>();

  private readonly log: Logger;

  constructor(
    private readonly ledger: MeterLedger,
    log: Logger,
    private readonly presence: Presence,
    /** how old a snapshot may get before a flush rewrites it unchanged (a third of the orphan limit) */
    private readonly heartbeatMs: number,
    private readonly retryWaits: MeterRetries = RETRY_WAITS,
  ) {
    this.log = log.child({ component: 'meter' });
    this.snapshots = new SnapshotWriter((snaps) => ledger.saveSnapshots(snaps));
    this.starts = new Batcher((inputs) => ledger.startSessions(inputs), {
      delayMs: START_BATCH_MS,
      max: START_BATCH_MAX,
    });
    this.pauses = new Batcher<MeteredItem, void>(
      async (items) => {
        await ledger.charge(items);
        return items.map((): void => undefined);
      },
      { delayMs: PAUSE_BATCH_MS, max: FLUSH_BATCH },
    );
    this.queue = new KeyedQueue((err, lessonId) => this.log.error({ err, lesson_id: lessonId }, 'meter effect failed'));
  }

  /** Applies the Postgres side of a presence change, queued per lesson. */
  apply(lessonId: string, change: Change, now: number): Promise<void> {
    const m = change.meter;
    if (!m || change.effects.length === 0) return Promise.resolve();
    return this.queue.run(lessonId, () =>
      withRetry(() => this.applyNow(lessonId, m, change, now), this.retryWaits).catch((err: unknown) => {
        if (m.state === 'starting' && change.effects.includes('start')) this.retryStart(lessonId, now);
        throw err;
      }),
    );
  }

  /** Keeps retrying the lesson's pending start whether or not anyone is present here, on any node (see `unstarted`). */
  retryStart(lessonId: string, now: number): void {
    this.unstarted.add(lessonId);
    this.presence.keepPendingStart(lessonId, now).catch((err: unknown) => this.log.warn({ err, lesson_id: lessonId }, 'pending start not listed in Redis: only this node retries it'));
  }

  /** Pending starts to tick although nobody may be present here: this node's and every node's listed in Redis. */
  async startsPending(): Promise<string[]> {
    const listed = await this.presence.pendingStarts().catch((err: unknown) => {
      this.log.warn({ err }, 'pending starts of other nodes not read');
      return [];
    });
    return [...new Set([...this.unstarted, ...listed])];
  }

  /** The lesson's meter is no longer `starting`: made, dropped or gone. */
  startSettled(lessonId: string): void {
    this.unstarted.delete(lessonId);
    this.presence.dropPendingStart(lessonId).catch((err: unknown) => this.log.warn({ err, lesson_id: lessonId }, 'pending start not unlisted in Redis'));
  }

  /** Ends the pending session end in `m` (idle sweep, archive), queued per lesson. */
  finishEnd(lessonId: string, m: MeterState, now: number): Promise<void> {
    const end = m.pendingEnd;
    if (!end) return Promise.resolve();
    return this.queue.run(lessonId, () =>
      withRetry(async () => {
        const after = await this.finishEndNow(lessonId, end, now);
        await this.snapshot(lessonId, after ?? m, 0, now, true);
      }, this.retryWaits),
    );
  }

  /** Ends a running session Redis does not know (nobody present): its watermark stands. */
  endUnknown(lessonId: string, sessionId: number, endedAt: Date, now: number): Promise<void> {
    return this.queue.run(lessonId, async () => {
      const { ended } = await this.ledger.endSession({ sessionId, endedAt, at: new Date(now) });
      if (ended) this.log.info({ lesson_id: lessonId, session_id: sessionId }, 'orphan session ended');
    });
  }

  /** Writes the durable snapshot of a meter (orphan reconciliation). */
  remember(lessonId: string, m: MeterState, people: number, now: number): Promise<void> {
    return this.queue.run(lessonId, () => this.snapshot(lessonId, m, people, now, true));
  }

  /**
   * The periodic flush of the lessons this node claimed: charge running
   * meters up to now (so GET /balance is live) and refresh their snapshots.
   */
  async flush(results: TickResult[], now: number): Promise<void> {
    const due = results.filter((r) => r.due && r.meter && sessionOf(r.meter) !== null);
    const items: MeteredItem[] = [];
    const lessonOf = new Map<number, string>();
    for (const r of due) {
      const m = r.meter!;
      // A meter rebuilt from Postgres is not charged before it settles (MeterMachine.settle):
      // it may yet pause in the past (a departure reported while Redis was away), and a
      // watermark charge cannot be taken back. The balance catches up at the next flush.
      if (m.seededAt !== null) continue;
      const sessionId = sessionOf(m)!;
      // up to where presence is certain (TickResult.safeUntil): a dead node's or a half-open
      // socket's departure, found later, is dated there, and a watermark cannot go down
      const upTo = Math.min(now, r.safeUntil);
      const cum = meteredSeconds(m, upTo);
      const running = runningSince(m) !== null;
      if (cum > this.chargedUpTo(r.lessonId, sessionId) || running) {
        lessonOf.set(sessionId, r.lessonId);
        items.push({ sessionId, cumulativeSeconds: cum, at: new Date(running ? upTo : (pausedAtOf(m) ?? now)), people: m.peopleMax || undefined });
      }
    }
    // one transaction for every lesson this node flushes (src/metering/charge.ts)
    for (let i = 0; i < items.length; i += FLUSH_BATCH) {
      // a session whose charge fails for good (bad data) is left out alone; the others are charged
      await writeSplitting(
        items.slice(i, i + FLUSH_BATCH),
        async (batch) => {
          // a lost connection is tried again; a row Postgres refuses for good is split out at once
          await withRetry(() => this.ledger.charge(batch), [100, 500], (err) => !causedByInput(err));
          for (const it of batch) this.markCharged(lessonOf.get(it.sessionId)!, it.sessionId, it.cumulativeSeconds);
        },
        (batch, err) => {
          const who = batch.length === 1 ? { session_id: batch[0].sessionId, lesson_id: lessonOf.get(batch[0].sessionId) } : { sessions: batch.length };
          const refused = causedByInput(err);
          this.log.error({ err, ...who, cause: refused ? 'session' : 'transient' }, 'flush charge failed');
          if (refused) this.onRefused?.('meter charge');
        },
      );
    }
    // The snapshot is the lesson's heartbeat for the orphan sweeper: rewrite it
    // when the meter moved, and otherwise often enough to stay fresh.
    const snaps = due
      .filter((r) => {
        const last = this.marksOf(r.lessonId)?.snapshot;
        return !last || last.seq !== r.meter!.seq || now - last.at >= this.heartbeatMs;
      })
      .map((r) => toSnapshot(r.lessonId, r.meter!, r.count, now));
    await writeSplitting(
      snaps,
      async (group) => {
        await this.ledger.saveSnapshots(group);
        for (const sn of group) this.markSnapshot(sn.lessonId, sn.seq, now);
      },
      (group, err) => {
        this.log.error({ err, ...(group.length === 1 ? { lesson_id: group[0].lessonId } : { lessons: group.length }) }, 'meter snapshot failed');
        if (causedByInput(err)) this.onRefused?.('meter snapshot');
      },
    );
  }

  async idle(): Promise<void> {
    await this.queue.idle();
    await this.starts.idle();
    await this.pauses.idle();
  }

  /** The Postgres side of each transition, in the order Redis decided them. */
  private async applyNow(lessonId: string, m: MeterState, change: Change, now: number): Promise<void> {
    let latest: MeterState = m;
    let count = change.count;
    let ended = false;
    const endFirst = async () => {
      if (!m.pendingEnd || ended) return;
      latest = (await this.finishEndNow(lessonId, m.pendingEnd, now)) ?? latest;
      ended = true;
    };
    for (const fx of change.effects) {
      switch (fx) {
        case 'ended':
          await endFirst();
          break;
        case 'start':
          // A new session never starts before the previous one is ended in Postgres.
          await endFirst();
          if (m.state === 'starting') {
            const started = await this.start(lessonId, m, count, now);
            if (started) {
              latest = started.meter ?? latest;
              count = started.count;
            }
          }
          break;
        case 'pause':
          // a pending start that paused has no session to charge yet: its time is in accMs
          if (m.state === 'paused') await this.charge(lessonId, m.sessionId, Math.floor(m.accMs / 1000), m.pausedAt ?? now, m.peopleMax);
          break;
        case 'resume':
        case 'empty':
        case 'occupied':
          break; // the snapshot below records them
        default:
          assertNever(fx);
      }
    }
    await this.snapshot(lessonId, latest, count, now, ended);
  }

  private async start(lessonId: string, m: Starting, count: number, now: number) {
    const { startAt } = m;
    // The session row commits with a snapshot of this meter naming it (SessionStartInput.meter): a
    // Redis lost before the bind below is rebuilt from this meter's figures (running since startAt).
    const r = await this.starts.add({
      lessonId,
      at: new Date(startAt),
      people: Math.max(METERED_PEOPLE, m.peopleMax, count),
      meter: toSnapshot(lessonId, m, count, now),
    });
    // undefined: the lesson was deleted (checked under its lock): no session
    if (!r) return undefined;
    const { session, started } = r;
    // Adopting a session that was already running (another node, or Redis lost
    // its meter): the watermark continues from what it has metered.
    const base = started ? 0 : session.seconds * 1000;
    const res = await this.presence.setSession(lessonId, session.id, startAt, base, now);
    if (started) this.log.info({ lesson_id: lessonId, session_id: session.id }, 'session started');
    this.unstarted.delete(lessonId);
    // A start made after its meter paused (a retried or slow start; people left meanwhile): the
    // pause charged nothing then, having no session, so what it metered is charged now.
    const bound = res.ok ? res.change.meter : null;
    if (bound?.state === 'paused' && bound.sessionId === session.id) await this.charge(lessonId, session.id, Math.floor(bound.accMs / 1000), bound.pausedAt ?? now, bound.peopleMax);
    return { meter: res.change.meter, count: res.change.count };
  }

  private async finishEndNow(lessonId: string, end: PendingEnd, now: number): Promise<MeterState | null> {
    const { sessionId } = end;
    const { ended } = await this.ledger.finishSession({
      sessionId,
      cumulativeSeconds: end.seconds,
      chargeAt: new Date(end.chargeAt),
      endedAt: new Date(end.endAt),
      at: new Date(now),
    });
    if (ended) this.log.info({ lesson_id: lessonId, session_id: sessionId, seconds: end.seconds }, 'session ended');
    return this.presence.clearEnd(lessonId, sessionId, now);
  }

  private async charge(lessonId: string, sessionId: number, cumulativeSeconds: number, at: number, people: number): Promise<void> {
    await this.pauses.add({ sessionId, cumulativeSeconds, at: new Date(at), people: people || undefined, unlessArchived: true });
    this.markCharged(lessonId, sessionId, cumulativeSeconds);
  }

  /** Snapshots matter only for lessons with a session (or one that just ended). */
  private async snapshot(lessonId: string, m: MeterState, people: number, now: number, force: boolean): Promise<void> {
    if (sessionOf(m) === null && !force) return;
    await this.snapshots.add(toSnapshot(lessonId, m, people, now));
    this.markSnapshot(lessonId, m.seq, now);
  }

  /** Up to where this node last charged the session (-1: not that it knows). */
  private chargedUpTo(lessonId: string, sessionId: number): number {
    const c = this.marksOf(lessonId)?.charged;
    return c?.sessionId === sessionId ? c.seconds : -1;
  }

  private markCharged(lessonId: string, sessionId: number, seconds: number): void {
    const marks = this.marksOf(lessonId);
    if (!marks) return;
    const c = marks.charged;
    marks.charged = { sessionId, seconds: c?.sessionId === sessionId ? Math.max(c.seconds, seconds) : seconds };
  }

  private markSnapshot(lessonId: string, seq: number, at: number): void {
    const marks = this.marksOf(lessonId);
    if (marks) marks.snapshot = { seq, at };
  }
}

function toSnapshot(lessonId: string, m: MeterState, people: number, now: number): MeterSnapshot {
  return {
    lessonId,
    seq: m.seq,
    sessionId: sessionOf(m),
    accMs: accOf(m),
    runningSince: runningSince(m) !== null ? new Date(runningSince(m)!) : null,
    emptySince: m.emptySince !== null ? new Date(m.emptySince) : null,
    people,
    at: new Date(now),
  };
}
