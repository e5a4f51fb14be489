import { describe, expect, it } from 'vitest';
import { prefetched } from '../../src/reports/prefetch.js';

/**
 * A stand-in for a postgres.js cursor (a library, not our code): batches
 * arrive later than they are asked for, next() answers synchronously once the
 * query is done, and the log records the order of calls.
 */
function cursorLike(batches: number, log: string[]) {
  let asked = 0;
  let inFlight = false;
  return {
    [Symbol.asyncIterator]: () => ({
      next(): Promise<IteratorResult<number>> | IteratorResult<number> {
        if (asked >= batches) return { done: true, value: undefined }; // synchronous, as postgres.js once done
        const n = ++asked;
        log.push(`ask ${n}`);
        inFlight = true;
        return new Promise((resolve) =>
          setTimeout(() => {
            inFlight = false;
            log.push(`got ${n}`);
            resolve({ done: false, value: n });
          }, 5),
        );
      },
      return(): IteratorResult<number> {
        log.push(inFlight ? 'closed while a batch was in flight' : 'closed');
        return { done: true, value: undefined };
      },
    }),
  };
}

describe('prefetched', () => {
  it('asks for the next batch before handing out the current one, and ends on a synchronous done', async () => {
    const log: string[] = [];
    const seen: number[] = [];
    for await (const n of prefetched(cursorLike(3, log) as AsyncIterable<number>)) {
      log.push(`use ${n}`);
      seen.push(n);
    }
    expect(seen).toEqual([1, 2, 3]);
    expect(log).toEqual(['ask 1', 'got 1', 'ask 2', 'use 1', 'got 2', 'ask 3', 'use 2', 'got 3', 'use 3']);
  });

  it('lets the batch in flight land before closing the source when the reader stops early', async () => {
    const log: string[] = [];
    for await (const n of prefetched(cursorLike(5, log) as AsyncIterable<number>)) {
      log.push(`use ${n}`);
      break;
    }
    expect(log).toEqual(['ask 1', 'got 1', 'ask 2', 'use 1', 'got 2', 'closed']);
  });
});
