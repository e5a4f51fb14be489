import type { Logger } from '../../src/logger.js';
import type { PresenceMark } from '../../src/domain/attendance.js';
import { DurableBatches } from './DurableBatches.js';
import type { RetrySchedule } from './KeptForLater.js';

const BATCH_MS = 20;
const BATCH_MAX = 500;
const RETRY_WAITS = [200, 1000, 5000];
/** A batch whose attempts all failed (Postgres away) is kept and tried again this often (ms). */
const AGAIN_MS = 5000;
/** Marks kept for a later try, at most; beyond it the oldest are dropped, logged. */
const WAITING_MAX = 50_000;

/**
 * Writes presence marks (a person's arrival and departure, dated as presence
 * and the meter dated them) for attendance (src/domain/attendance.ts):
 * batched, as arrivals come in bursts, and kept while Postgres is away, since
 * a mark carries its own date and pairs the same however late it is written.
 */
export class PresenceLog {
  private readonly batches: DurableBatches<PresenceMark>;
  /** a mark Postgres refuses for good was left out of its batch (the gateway counts it) */
  onRefused: (() => void) | undefined;

  constructor(
    /** records a batch (recordPresenceMarks on Postgres) */
    write: (batch: PresenceMark[]) => Promise<void>,
    log: Logger,
    retries: RetrySchedule = { waits: RETRY_WAITS, againMs: AGAIN_MS },
  ) {
    this.batches = new DurableBatches(log, { write, retries, batchMs: BATCH_MS, batchMax: BATCH_MAX, what: 'presence marks', maxKept: WAITING_MAX, lessonOf: (m) => m.lessonId, refused: () => this.onRefused?.() });
  }

  add(mark: PresenceMark): void {
    this.batches.add(mark);
  }

  idle(): Promise<void> {
    return this.batches.idle();
  }

  close(): void {
    this.batches.close();
  }
}
