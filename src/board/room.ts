import type { Actor } from './apply.js';
import { boardError } from './errors.js';
import type { SequencedOp, BoardOp } from './schema.js';
import type { BatchItem, BatchResult, BoardStore } from './store.js';

/** What the sender of an operation hears back: its place in the order, or null when nothing was left to apply. */
export interface Ack {
  seq: number | null;
}

interface Pending extends BatchItem {
  origin?: string;
  resolve: (ack: Ack) => void;
  reject: (err: unknown) => void;
}

/**
 * One lesson's board on one gateway node: the sequencer's front door.
 *
 * Group commit: while a batch is being committed, operations that arrive
 * queue up and go together in the next transaction. So a lesson costs at most
 * one Postgres transaction in flight per node, however fast people draw, and
 * an operation waits at most for the batch in flight plus its own. The order
 * itself is decided by Postgres (BoardStore), so rooms of the same lesson on
 * several nodes never disagree.
 */
export class BoardRoom {
  private queue: Pending[] = [];
  private flushing: Promise<void> | null = null;

  constructor(
    readonly lessonId: string,
    private readonly store: BoardStore,
    private readonly opts: {
      maxBatch: number;
      now: () => Date;
      /** called after each commit with the applied operations, in order */
      onCommitted: (ops: SequencedOp[]) => void;
    },
  ) {}

  /** Resolves after the operation is durable in Postgres; rejects with a BoardOpError when refused. */
  submit(op: BoardOp, actor: Actor, origin?: string): Promise<Ack> {
    return new Promise<Ack>((resolve, reject) => {
      this.queue.push({ op, actor, origin, resolve, reject });
      this.flushing ??= this.drain();
    });
  }

  /** True while nothing is queued or being committed (the service drops idle rooms). */
  get idle(): boolean {
    return this.flushing === null && this.queue.length === 0;
  }

  /** Waits until everything submitted so far is committed or refused. */
  async settled(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length) {
        const batch = this.queue.splice(0, this.opts.maxBatch);
        let results: BatchResult[];
        try {
          results = await this.store.commitBatch(this.lessonId, batch, this.opts.now());
        } catch {
          // Nothing of the batch was committed (one transaction): every sender hears so and may retry.
          const err = boardError('unavailable', 'the board could not be saved; nothing was applied, try again');
          for (const p of batch) p.reject(err);
          continue;
        }
        const applied: SequencedOp[] = [];
        results.forEach((r, i) => {
          if (r.ok && r.seq !== null) applied.push({ seq: r.seq, op: r.op, origin: batch[i].origin });
        });
        // Relay first: the others see the operation no later than its sender hears the ack.
        if (applied.length) this.opts.onCommitted(applied);
        results.forEach((r, i) => (r.ok ? batch[i].resolve({ seq: r.seq }) : batch[i].reject(r.error)));
      }
    } finally {
      this.flushing = null;
    }
  }
}
