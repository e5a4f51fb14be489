import type { Sql } from '../../src/db/index.js';
import type { Logger } from '../../src/logger.js';
import { recordPresenceMarks, type PresenceMark } from '../../src/domain/attendance.js';
import { Batcher } from '../../src/lib/Batcher.js';
import { withRetry } from '../../src/lib/retry.js';
import { KeptForLater, type RetrySchedule } from './KeptForLater.js';

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
  private readonly batcher: Batcher<PresenceMark>;
  private readonly kept: KeptForLater<PresenceMark>;

  constructor(sql: Sql, log: Logger, retries: RetrySchedule = { waits: RETRY_WAITS, againMs: AGAIN_MS }) {
    this.kept = new KeptForLater(log, { what: 'presence marks', max: WAITING_MAX, everyMs: retries.againMs, again: (m) => this.add(m) });
    this.batcher = new Batcher<PresenceMark, void>(
      async (batch) => {
        try {
          await withRetry(() => recordPresenceMarks(sql, batch), retries.waits);
        } catch (err) {
          this.kept.keep(batch, err);
        }
        return batch.map((): void => undefined);
      },
      { delayMs: BATCH_MS, max: BATCH_MAX, concurrency: 2 },
    );
  }

  add(mark: PresenceMark): void {
    void this.batcher.add(mark);
  }

  idle(): Promise<void> {
    return this.batcher.idle();
  }

  close(): void {
    this.kept.close();
  }
}
