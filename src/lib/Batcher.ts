/**
 * Collects items for `delayMs` (or up to `max`) and runs them as one batch
 * (one statement or one transaction for many lessons): Postgres work of the
 * gateway comes in bursts (a class arriving, a class leaving), and each item
 * would otherwise be its own round trips. With `delayMs: 0` a batch holds what
 * was added in the same event-loop turn (flushed by setImmediate, no added
 * wait): the partner API's point reads under load. `add` resolves with the
 * item's own result once its batch is done, or rejects with the batch's error
 * (callers retry item by item; a retried item joins a later batch).
 *
 * At most `concurrency` batches run at once (default 2), so background work
 * cannot take every pool connection. While every slot is busy, what arrives
 * waits and goes in one batch when a slot frees (group commit): the busier
 * Postgres is, the larger and fewer the batches, instead of a queue of small
 * ones each paying its own round trips. A freed slot still honours `delayMs`:
 * it takes what waits once the oldest of it has waited `delayMs` (or `max`
 * items wait), not at once, which under a steady stream would start a batch
 * of a few items each time a batch ends.
 */
export class Batcher<I, O = void> {
  private pending: { item: I; at: number; done: (o: O) => void; fail: (err: unknown) => void }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private readonly running = new Set<Promise<void>>();
  private readonly concurrency: number;

  constructor(
    /** runs one batch; returns one result per item, in order */
    private readonly runBatch: (items: I[]) => Promise<O[]>,
    private readonly opts: { delayMs: number; max: number; concurrency?: number },
  ) {
    this.concurrency = opts.concurrency ?? 2;
  }

  add(item: I): Promise<O> {
    return new Promise<O>((done, fail) => {
      this.pending.push({ item, at: performance.now(), done, fail });
      if (this.pending.length >= this.opts.max) this.flush();
      else if (this.opts.delayMs > 0) this.timer ??= setTimeout(() => this.flush(), this.opts.delayMs);
      else this.immediate ??= setImmediate(() => this.flush());
    });
  }

  /** Starts what is pending, in batches of up to `max`, as far as free slots allow; the rest goes when a batch ends. */
  flush(): void {
    clearTimeout(this.timer);
    clearImmediate(this.immediate);
    this.timer = this.immediate = undefined;
    while (this.pending.length > 0 && this.running.size < this.concurrency) this.start(this.pending.splice(0, this.opts.max));
  }

  /** Resolves when nothing is pending and every batch started has settled. */
  async idle(): Promise<void> {
    this.flush();
    while (this.running.size > 0) {
      await Promise.allSettled([...this.running]);
      this.flush();
    }
  }

  /** A batch ended: what waits goes now if it has waited `delayMs` (or fills a batch), else when it has. */
  private slotFreed(): void {
    if (this.pending.length === 0) return;
    const wait = this.pending[0].at + this.opts.delayMs - performance.now();
    if (wait <= 0 || this.pending.length >= this.opts.max) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), wait);
  }

  private start(batch: typeof this.pending): void {
    const run = Promise.resolve()
      .then(() => this.runBatch(batch.map((b) => b.item)))
      .then(
        (out) => batch.forEach((b, i) => b.done(out[i])),
        (err) => batch.forEach((b) => b.fail(err)),
      )
      .finally(() => {
        this.running.delete(run);
        this.slotFreed();
      });
    this.running.add(run);
  }
}
