/**
 * Iterates `source` one step ahead: the next item is requested as soon as the
 * current one is handed out, so the producer (a Postgres cursor) works while
 * the consumer (rendering, the socket) handles the current item.
 *
 * When the consumer stops early, the request in flight is awaited before the
 * source is closed: a postgres.js cursor closed while a batch is in flight
 * would never release its connection. next() may also answer synchronously
 * (postgres.js does once the query is done), so every answer goes through
 * Promise.resolve.
 */
export async function* prefetched<T>(source: AsyncIterable<T>): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<T>> = Promise.resolve(it.next());
  let finished = false;
  try {
    for (;;) {
      const step = await pending;
      if (step.done) {
        finished = true;
        return;
      }
      pending = Promise.resolve(it.next());
      yield step.value;
    }
  } finally {
    if (!finished) {
      const last = await pending.catch(() => ({ done: true }) as IteratorResult<T>);
      if (!last.done) await it.return?.();
    }
  }
}
