import { causedByInput, writeSplitting } from '../../src/db/errors.js';
import type { Logger } from '../../src/logger.js';
import { Batcher } from '../../src/lib/Batcher.js';
import { withRetry } from '../../src/lib/retry.js';
import { KeptForLater, type RetrySchedule } from './KeptForLater.js';

export interface DurableBatchesOptions<T> {
  /** writes one batch (one transaction); an item carries its own date, so a late write records the same */
  write: (batch: T[]) => Promise<unknown>;
  retries: RetrySchedule;
  /** items are collected this long (or up to batchMax) before one write */
  batchMs: number;
  batchMax: number;
  /** what the items are, in the log lines */
  what: string;
  /** items kept for a later try, at most; beyond it the oldest are dropped, logged */
  maxKept: number;
  /** a batch was written */
  written?: (batch: T[]) => void;
  /** an item is given up: too many kept, or refused by Postgres for good */
  dropped?: (item: T) => void;
  /** a kept item goes into a batch again */
  again?: (item: T) => void;
  /** the lesson an item belongs to, logged with an item Postgres refuses for good */
  lessonOf: (item: T) => string;
  /** an item Postgres refuses for good was left out (after `dropped`) */
  refused?: () => void;
}

/**
 * Items written to Postgres in batches, whatever Postgres does meanwhile: a
 * batch (src/lib/Batcher.ts, two at a time) is tried again after each of
 * `retries.waits`, and when every attempt failed it is kept (KeptForLater)
 * and its items are added again every `retries.againMs` until they are
 * written. A batch holds many lessons' items, so a write Postgres refuses for
 * what it wrote (causedByInput: bad data, a constraint) is split until the
 * item that causes it is alone (writeSplitting): the others are written, and
 * that one is dropped and logged with its lesson, as kept it would be refused
 * again for ever. The write is a function, so an in-memory gateway writes
 * elsewhere with the same batching and keeping.
 */
export class DurableBatches<T> {
  private readonly batcher: Batcher<T>;
  private readonly kept: KeptForLater<T>;

  constructor(
    private readonly log: Logger,
    o: DurableBatchesOptions<T>,
  ) {
    this.kept = new KeptForLater(log, {
      what: o.what,
      max: o.maxKept,
      everyMs: o.retries.againMs,
      again: (item) => {
        o.again?.(item);
        this.add(item);
      },
      dropped: o.dropped,
    });
    this.batcher = new Batcher<T, void>(
      async (batch) => {
        await writeSplitting(
          batch,
          async (group) => {
            await withRetry(() => o.write(group), o.retries.waits, (err) => !causedByInput(err));
            o.written?.(group);
          },
          (group, err) => {
            if (!causedByInput(err)) return this.kept.keep(group, err);
            o.dropped?.(group[0]);
            o.refused?.();
            this.log.error({ err, lesson_id: o.lessonOf(group[0]) }, `${o.what}: one refused by Postgres for good, not recorded`);
          },
        );
        return batch.map((): void => undefined);
      },
      { delayMs: o.batchMs, max: o.batchMax, concurrency: 2 },
    );
  }

  add(item: T): void {
    void this.batcher.add(item);
  }

  /** Resolves when no batch is pending or running (kept items wait for their next try). */
  idle(): Promise<void> {
    return this.batcher.idle();
  }

  /** The process stops: what is still kept is lost, and said so. */
  close(): void {
    this.kept.close();
  }
}
