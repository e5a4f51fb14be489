/** Retries a task with a fixed list of waits (ms) between attempts. */
export async function withRetry<T>(task: () => Promise<T>, waits: readonly number[]): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await task();
    } catch (err) {
      if (i >= waits.length) throw err;
      await new Promise((r) => setTimeout(r, waits[i]));
    }
  }
}
