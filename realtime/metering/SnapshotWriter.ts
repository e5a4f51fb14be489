import type { MeterSnapshot } from '../../src/metering/meters.js';
import { Batcher } from '../../src/lib/Batcher.js';

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
  private readonly batcher: Batcher<MeterSnapshot>;

  constructor(
    /** writes the snapshots in one statement (MeterLedger.saveSnapshots) */
    save: (snaps: MeterSnapshot[]) => Promise<void>,
  ) {
    this.batcher = new Batcher<MeterSnapshot, void>(
      async (snaps) => {
        await save(snaps);
        return snaps.map((): void => undefined);
      },
      { delayMs: BATCH_MS, max: BATCH_MAX, concurrency: 4 },
    );
  }

  add(snap: MeterSnapshot): Promise<void> {
    return this.batcher.add(snap);
  }
}
