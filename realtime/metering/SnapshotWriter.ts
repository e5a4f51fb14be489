import type { Sql } from '../../src/db/index.js';
import { saveMeterSnapshots, type MeterSnapshot } from '../../src/metering/meters.js';

const BATCH_MS = 10;
const BATCH_MAX = 500;

/**
 * Meter snapshots (lesson_meters) of many lessons written in one statement:
 * transitions come in bursts (a class arriving, a class leaving), and each
 * would otherwise be its own round trip. `add` resolves once the row is
 * written, so a lesson's queue still waits for its own snapshot. Rows are
 * seq-ordered in the table, so batching cannot reorder a lesson's states.
 */
export class SnapshotWriter {
  private pending: { snap: MeterSnapshot; done: () => void; fail: (err: unknown) => void }[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly sql: Sql) {}

  add(snap: MeterSnapshot): Promise<void> {
    return new Promise((done, fail) => {
      this.pending.push({ snap, done, fail });
      if (this.pending.length >= BATCH_MAX) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), BATCH_MS);
    });
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending.splice(0);
    if (batch.length === 0) return;
    saveMeterSnapshots(this.sql, batch.map((b) => b.snap)).then(
      () => batch.forEach((b) => b.done()),
      (err) => batch.forEach((b) => b.fail(err)),
    );
  }
}
