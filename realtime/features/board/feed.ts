import type { SequencedOp } from '../../../src/board/schema.js';

/** A local subscriber to one lesson's board (a gateway fans these out to its sockets). */
export interface BoardListener {
  /** committed operations, in sequence order, without gaps */
  ops(ops: SequencedOp[]): void;
  /**
   * Operations up to `seq` could not be relayed (a Redis message was lost):
   * the listener's clients must resync from the store (`board.sync`).
   */
  reset(seq: number): void;
}

/**
 * One lesson's ordered feed on one node. Operations reach a node by two paths
 * (its own commits directly, other nodes' through Redis) and may arrive out of
 * order; the feed holds back anything after a gap and delivers strictly in
 * sequence. A gap that stays open for `gapMs` (a lost Redis message, a node
 * that died between commit and publish) is closed by a reset: the listeners
 * resync from Postgres, which has everything that was acknowledged.
 */
export class LessonFeed {
  readonly listeners = new Set<BoardListener>();
  /** last delivered seq; undefined until the feed knows where the board stands */
  private last: number | undefined;
  private readonly pending = new Map<number, SequencedOp>();
  private gapTimer: NodeJS.Timeout | null = null;
  /** the read of where the board stands, while one is in flight */
  private starting: Promise<void> | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly gapMs: number,
    /** reads the board's current seq from the store (used on start and to close a gap) */
    private readonly currentSeq: () => Promise<number>,
    /** told once, at close */
    private readonly onClose?: () => void,
  ) {}

  get seq(): number | undefined {
    return this.last;
  }

  /**
   * Resolves once the feed knows where the board stands: the first call reads
   * the seq from the store (the caller listens to the relay already, so every
   * commit after the read is heard); until then what the feed hears is held.
   * A failed read rejects its callers and is tried again after `gapMs` (or at
   * the next call), so a feed never stays unstarted while Postgres is back.
   */
  started(): Promise<void> {
    if (this.last !== undefined) return Promise.resolve();
    return (this.starting ??= this.readStart());
  }

  private async readStart(): Promise<void> {
    try {
      this.start(await this.currentSeq());
    } catch (err) {
      if (!this.closed && !this.retryTimer) {
        this.retryTimer = setTimeout(() => {
          this.retryTimer = null;
          this.started().catch(() => undefined);
        }, this.gapMs);
        this.retryTimer.unref();
      }
      throw err;
    } finally {
      this.starting = null;
    }
  }

  /** Sets the starting point once the Redis subscription is live; ops up to `seq` are already in the store. */
  private start(seq: number): void {
    this.last = Math.max(seq, this.last ?? 0);
    this.drain();
  }

  push(ops: SequencedOp[]): void {
    // a closed feed hears nothing more (no gap of it waits for a read)
    if (this.closed) return;
    for (const o of ops) if (this.last === undefined || o.seq > this.last) this.pending.set(o.seq, o);
    if (this.last !== undefined) this.drain();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose?.();
    if (this.gapTimer) clearTimeout(this.gapTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.gapTimer = this.retryTimer = null;
    this.pending.clear();
    this.listeners.clear();
  }

  private drain(): void {
    const out: SequencedOp[] = [];
    for (const seq of [...this.pending.keys()]) if (seq <= this.last!) this.pending.delete(seq);
    while (this.pending.has(this.last! + 1)) {
      const next = this.pending.get(this.last! + 1)!;
      this.pending.delete(next.seq);
      this.last = next.seq;
      out.push(next);
    }
    if (out.length) for (const l of this.listeners) l.ops(out);
    if (this.pending.size === 0) {
      if (this.gapTimer) clearTimeout(this.gapTimer);
      this.gapTimer = null;
    } else if (!this.gapTimer) {
      this.gapTimer = setTimeout(() => void this.closeGap(), this.gapMs);
      this.gapTimer.unref();
    }
  }

  private async closeGap(): Promise<void> {
    this.gapTimer = null;
    let seq: number;
    try {
      seq = await this.currentSeq();
    } catch {
      if (this.closed) return;
      // Postgres unreachable: try again later rather than lose track
      this.gapTimer = setTimeout(() => void this.closeGap(), this.gapMs);
      this.gapTimer.unref();
      return;
    }
    // Everything pending up to the highest seq we know of is in the store: skip to there.
    const top = Math.max(seq, ...this.pending.keys());
    this.last = Math.max(this.last ?? 0, top);
    this.pending.clear();
    for (const l of this.listeners) l.reset(this.last);
  }
}
