/** Retries a task with a fixed list of waits (ms) between attempts; an error `retryable` refuses is thrown at once. */
export async function withRetry<T>(task: () => Promise<T>, waits: readonly number[], retryable: (err: unknown) => boolean = () => true): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await task();
    } catch (err) {
      if (i >= waits.length || !retryable(err)) throw err;
      await new Promise((r) => setTimeout(r, waits[i]));
    }
  }
}
