import type { Logger } from '../../src/logger.js';
import type { ParticipantJoin } from '../../src/metering/participants.js';
import { withTimeout } from '../../src/lib/timeout.js';
import { DurableBatches } from './DurableBatches.js';
import type { RetrySchedule } from './KeptForLater.js';

/** Arrivals are collected this long (or up to BATCH_MAX) before one transaction records them. */
const BATCH_MS = 20;
const BATCH_MAX = 200;
/** Waits between a batch's attempts (ms): a lost connection or a lock timeout. */
const RETRY_WAITS = [200, 1000, 5000];
/** A batch whose attempts all failed (Postgres away longer than RETRY_WAITS) is kept and tried again this often (ms). */
export const AGAIN_MS = 5000;
/**
 * Arrivals kept for a later try, at most. While Postgres is away only links
 * this node already knows can join (an unknown token is refused with 503), so
 * this is reached only by a long outage with many reconnecting people; beyond
 * it the oldest are dropped, logged.
 */
const WAITING_MAX = 20_000;
/** How long a stopping node waits for Redis to forget its unrecorded arrivals (forgetUnrecorded). */
const FORGET_WAIT_MS = 1000;

/**
 * participant.joined for arrivals Redis did not filter out: batched, so a
 * burst of 1,000 joins a second costs a few transactions instead of a
 * thousand; Postgres still decides the 6-hour rule (recordParticipantsJoined).
 * A failed batch is retried, and kept while Postgres is away, however long:
 * the rule and the event's created_at are the arrival's time, so recording it
 * late decides and says the same, and a batch whose commit was lost with its
 * connection claims nothing twice. An arrival is never announced before its
 * batch commits. A process that stops while Postgres is away loses what it
 * kept (logged), but first has Redis's filter forget every arrival it has not
 * recorded (`forgetUnrecorded`, before its sockets close), so those people are
 * announced when they arrive again on another node.
 */
export class JoinAnnouncer {
  private readonly batches: DurableBatches<ParticipantJoin>;
  /** every arrival added and neither committed nor forgotten (forgetUnrecorded): pending, in a batch, or kept */
  private readonly unrecorded = new Set<ParticipantJoin>();
  /** an arrival Postgres refuses for good was left out of its batch (the gateway counts it) */
  onRefused: (() => void) | undefined;

  constructor(
    /** records a batch in one transaction (recordParticipantsJoined on Postgres) */
    write: (batch: ParticipantJoin[]) => Promise<unknown>,
    log: Logger,
    /** Redis's filter forgets the claim of an arrival (Presence.forgetJoined) */
    private readonly forget: (join: ParticipantJoin) => Promise<void>,
    retries: RetrySchedule = { waits: RETRY_WAITS, againMs: AGAIN_MS },
  ) {
    this.batches = new DurableBatches(log, {
      write,
      retries,
      batchMs: BATCH_MS,
      batchMax: BATCH_MAX,
      what: 'participant.joined',
      maxKept: WAITING_MAX,
      written: (batch) => {
        for (const join of batch) this.unrecorded.delete(join);
      },
      dropped: (join) => this.unrecorded.delete(join),
      again: (join) => this.unrecorded.add(join),
      lessonOf: (join) => join.lessonId,
      refused: () => this.onRefused?.(),
    });
  }

  add(join: ParticipantJoin): void {
    this.unrecorded.add(join);
    this.batches.add(join);
  }

  /**
   * The node is about to close its sockets (a drain or a stop): Redis's filter
   * forgets every arrival not recorded yet, once (a drain's stop asks again),
   * so a person moving to another node is announced there if this node never
   * gets to (Postgres still decides: one event in 6 hours, whichever commits
   * first). Best effort, and at most FORGET_WAIT_MS: Redis may be away too,
   * and the stop must go on.
   */
  async forgetUnrecorded(): Promise<void> {
    if (this.unrecorded.size === 0) return;
    const joins = [...this.unrecorded];
    this.unrecorded.clear();
    await withTimeout(Promise.all(joins.map((join) => this.forget(join).catch(() => undefined))), FORGET_WAIT_MS).catch(() => undefined);
  }

  /** Resolves when no batch is pending or running (kept arrivals wait for their next try). */
  idle(): Promise<void> {
    return this.batches.idle();
  }

  /** The process stops: what is still kept for Postgres is lost, and said so. */
  close(): void {
    this.batches.close();
    this.unrecorded.clear();
  }
}
