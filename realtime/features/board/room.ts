import type { Actor } from '../../../src/board/apply.js';
import { boardError } from '../../../src/board/errors.js';
import type { SequencedOp, BoardOp } from '../../../src/board/schema.js';
import type { BatchItem, BatchResult, BoardStore } from '../../../src/board/store.js';
import { writeSplitting } from '../../../src/db/errors.js';

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
 * Operations queue here in arrival order. While a batch of the lesson is
 * being committed, everything that arrives waits and goes in the next one
 * (group commit), so a lesson has at most one transaction in flight per node
 * however fast people draw. The BoardCommitter decides when, and commits the
 * batches of many lessons together. The order itself is decided by Postgres
 * (BoardStore), so rooms of the same lesson on several nodes never disagree.
 */
export class BoardRoom {
  private queue: Pending[] = [];
  /** a batch of this lesson is in a transaction */
  inFlight = false;
  private waiters: (() => void)[] = [];

  constructor(
    readonly lessonId: string,
    private readonly committer: BoardCommitter,
    /** called after each commit with the applied operations, in order */
    private readonly onCommitted: (ops: SequencedOp[]) => void,
  ) {}

  /** Resolves after the operation is durable in Postgres; rejects with a BoardOpError when refused. */
  submit(op: BoardOp, actor: Actor, origin?: string): Promise<Ack> {
    return new Promise<Ack>((resolve, reject) => {
      this.queue.push({ op, actor, origin, resolve, reject });
      this.committer.ready(this);
    });
  }

  /** True while nothing is queued or being committed (the service drops idle rooms). */
  get idle(): boolean {
    return !this.inFlight && this.queue.length === 0;
  }

  get hasQueued(): boolean {
    return this.queue.length > 0;
  }

  /** Waits until everything submitted so far is committed or refused. */
  async settled(): Promise<void> {
    while (!this.idle) await new Promise<void>((r) => this.waiters.push(r));
  }

  /** The committer takes the next batch (at most `max` operations). */
  take(max: number): Pending[] {
    this.inFlight = true;
    return this.queue.splice(0, max);
  }

  /** The committer is done with a batch: results in its order, or the transaction failed (nothing applied). */
  done(batch: Pending[], results: BatchResult[] | null): void {
    if (!results) {
      const err = boardError('unavailable', 'the board could not be saved; nothing was applied, try again');
      for (const p of batch) p.reject(err);
    } else {
      const applied: SequencedOp[] = [];
      results.forEach((r, i) => {
        if (r.ok && r.seq !== null) applied.push({ seq: r.seq, op: r.op, origin: batch[i].origin, ...(r.skipped ? { skipped: r.skipped } : {}), ...(r.restamped ? { restamped: r.restamped } : {}) });
      });
      // Relay first: the others see the operation no later than its sender hears the ack.
      if (applied.length) this.onCommitted(applied);
      results.forEach((r, i) => (r.ok ? batch[i].resolve({ seq: r.seq }) : batch[i].reject(r.error)));
    }
    this.inFlight = false;
    if (this.queue.length) this.committer.ready(this);
    else for (const w of this.waiters.splice(0)) w();
  }
}

/** Postgres errors worth one more try: the transaction did nothing and may succeed as is. */
const RETRYABLE = new Set(['40P01', '40001']); // deadlock detected, serialization failure

/**
 * A node's group commit across lessons: whenever a transaction slot is free,
 * the batches of up to `maxLessons` lessons that have operations waiting go
 * in one transaction (BoardStore.commitLessons), with up to `concurrency`
 * transactions in flight. One lesson is never in two transactions at once.
 * With one busy lesson this is the per-lesson group commit; with a thousand
 * quiet ones it turns a thousand small transactions (and WAL flushes) into a
 * few dozen.
 */
export class BoardCommitter {
  /** rooms with operations waiting and no batch in flight, oldest first */
  private readonly waiting = new Set<BoardRoom>();
  private running = 0;

  constructor(
    private readonly store: BoardStore,
    private readonly opts: {
      maxBatch: number;
      maxLessons: number;
      concurrency: number;
      now: () => Date;
      /**
       * A transaction that failed for good: its operations are refused with `unavailable`. A
       * failure caused by the operations names the one lesson that caused it (the others were
       * committed without it); a transient one names every lesson of the transaction.
       */
      onFailure?: (err: unknown, lessonIds: string[]) => void;
    },
  ) {}

  ready(room: BoardRoom): void {
    if (room.inFlight || !room.hasQueued) return;
    this.waiting.add(room);
    this.pump();
  }

  private pump(): void {
    while (this.running < this.opts.concurrency && this.waiting.size > 0) {
      const rooms: BoardRoom[] = [];
      for (const r of this.waiting) {
        rooms.push(r);
        if (rooms.length >= this.opts.maxLessons) break;
      }
      for (const r of rooms) this.waiting.delete(r);
      const batches = rooms.map((room) => ({ room, items: room.take(this.opts.maxBatch) }));
      this.running++;
      void this.commit(batches).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  /**
   * One lesson's batch can fail the whole transaction (a value out of range, a constraint): the
   * lessons are then committed in halves until the ones that fail are alone, so only they are refused.
   */
  private async commit(batches: Batch[]): Promise<void> {
    await writeSplitting(
      batches,
      async (group) => {
        const results = await this.attempt(group);
        for (const b of group) b.room.done(b.items, results.get(b.room.lessonId) ?? null);
      },
      (group, err) => {
        this.opts.onFailure?.(err, group.map((b) => b.room.lessonId));
        for (const b of group) b.room.done(b.items, null);
      },
    );
  }

  /** One transaction, tried again (at most 3 times in all) when Postgres says it may succeed as is. */
  private async attempt(batches: Batch[]): Promise<Map<string, BatchResult[]>> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.store.commitLessons(
          batches.map((b) => ({ lessonId: b.room.lessonId, items: b.items })),
          this.opts.now(),
        );
      } catch (err) {
        if (attempt === 3 || !RETRYABLE.has((err as { code?: string }).code ?? '')) throw err;
      }
    }
  }
}

type Batch = { room: BoardRoom; items: Pending[] };
