import { Limiter } from './Limiter.js';

/**
 * Collects items for `delayMs` (or up to `max`) and runs them as one batch
 * (one statement or one transaction for many lessons): Postgres work of the
 * gateway comes in bursts (a class arriving, a class leaving), and each item
 * would otherwise be its own round trips. With `delayMs: 0` a batch holds what
 * was added in the same event-loop turn (flushed by setImmediate, no added
 * wait): the partner API's point reads under load. `add` resolves with the
 * item's own result once its batch is done, or rejects with the batch's error
 * (callers retry item by item; a retried item joins a later batch).
 */
export class Batcher<I, O = void> {
  private pending: { item: I; done: (o: O) => void; fail: (err: unknown) => void }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private readonly limiter: Limiter;

  constructor(
    /** runs one batch; returns one result per item, in order */
    private readonly runBatch: (items: I[]) => Promise<O[]>,
    private readonly opts: { delayMs: number; max: number; concurrency?: number },
  ) {
    this.limiter = new Limiter(opts.concurrency ?? 2);
  }

  add(item: I): Promise<O> {
    return new Promise<O>((done, fail) => {
      this.pending.push({ item, done, fail });
      if (this.pending.length >= this.opts.max) this.flush();
      else if (this.opts.delayMs > 0) this.timer ??= setTimeout(() => this.flush(), this.opts.delayMs);
      else this.immediate ??= setImmediate(() => this.flush());
    });
  }

  flush(): void {
    clearTimeout(this.timer);
    clearImmediate(this.immediate);
    this.timer = this.immediate = undefined;
    const batch = this.pending.splice(0);
    if (batch.length === 0) return;
    this.limiter
      .run(() => this.runBatch(batch.map((b) => b.item)))
      .then(
        (out) => batch.forEach((b, i) => b.done(out[i])),
        (err) => batch.forEach((b) => b.fail(err)),
      );
  }

  /** Resolves when every batch started so far has settled. */
  async idle(): Promise<void> {
    this.flush();
    await this.limiter.idle();
  }
}
