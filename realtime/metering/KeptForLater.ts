import type { Logger } from '../../src/logger.js';

/** The waits (ms) between a batch's attempts, and before a kept batch's next try (`againMs`); tests of an outage shorten them. */
export interface RetrySchedule {
  waits: readonly number[];
  againMs: number;
}

/**
 * Items whose Postgres write failed on every attempt (Postgres away longer
 * than the retries), kept and handed back to `again` every `everyMs` until
 * they are written: each carries its own date, so a late write records the
 * same. At most `max` are kept; beyond it the oldest are dropped (`dropped`
 * hears of them) and the loss is logged. What `what` names is in the logs.
 */
export class KeptForLater<T> {
  private waiting: T[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly log: Logger,
    private readonly opts: { what: string; max: number; everyMs: number; again: (item: T) => void; dropped?: (item: T) => void },
  ) {}

  keep(batch: T[], err: unknown): void {
    this.waiting.push(...batch);
    const over = this.waiting.length - this.opts.max;
    if (over > 0) {
      for (const item of this.waiting.splice(0, over)) this.opts.dropped?.(item);
      this.log.error({ [this.opts.what]: over }, `${this.opts.what} dropped: too many waiting for Postgres`);
    }
    this.log.warn({ err, [this.opts.what]: batch.length, waiting: this.waiting.length }, `${this.opts.what} batch failed; kept for a later try`);
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const again = this.waiting;
      this.waiting = [];
      for (const item of again) this.opts.again(item);
    }, this.opts.everyMs);
    this.timer.unref();
  }

  /** The process stops: what is still kept is lost, and said so. */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.waiting.length > 0) this.log.error({ [this.opts.what]: this.waiting.length }, `${this.opts.what} not recorded: Postgres was away until the stop`);
    this.waiting = [];
  }
}
