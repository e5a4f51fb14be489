/**
 * Runs tasks one after another per key (e.g. the Postgres effects of one
 * lesson on this node, in the order Redis decided them); keys run in parallel.
 * A failing task is reported and does not stop the ones after it.
 */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<void>>();

  constructor(private readonly onError: (err: unknown, key: string) => void) {}

  run(key: string, task: () => Promise<void>): Promise<void> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.then(task).catch((err) => this.onError(err, key));
    this.tails.set(key, next);
    void next.then(() => {
      if (this.tails.get(key) === next) this.tails.delete(key);
    });
    return next;
  }

  get size(): number {
    return this.tails.size;
  }

  /** Resolves when every task queued so far has settled. */
  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.all([...this.tails.values()]);
  }
}

/** Runs `fn` over `items` with at most `limit` in flight. */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
