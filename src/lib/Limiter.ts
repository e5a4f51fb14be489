/**
 * At most `concurrency` tasks at once; the rest wait in order. Keeps
 * background Postgres work (participant.joined) from taking every pool
 * connection away from token lookups and meter writes.
 */
export class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(private readonly concurrency: number) {}

  run<T>(task: () => Promise<T>): Promise<T> {
    const p = this.acquire().then(async () => {
      try {
        return await task();
      } finally {
        this.active--;
        this.waiting.shift()?.();
      }
    });
    this.inFlight.add(p);
    void p.catch(() => undefined).finally(() => this.inFlight.delete(p));
    return p;
  }

  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private acquire(): Promise<void> {
    if (this.active < this.concurrency) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) =>
      this.waiting.push(() => {
        this.active++;
        resolve();
      }),
    );
  }
}

/** Retries a task with a fixed list of waits (ms) between attempts. */
export async function withRetry<T>(task: () => Promise<T>, waits: number[]): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await task();
    } catch (err) {
      if (i >= waits.length) throw err;
      await new Promise((r) => setTimeout(r, waits[i]));
    }
  }
}
