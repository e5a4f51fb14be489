import { describe, expect, it } from 'vitest';
import { Batcher } from '../../src/lib/Batcher.js';

/** A batch function that records its batches and holds each until released. */
function gated() {
  const batches: number[][] = [];
  const gates: (() => void)[] = [];
  const run = async (items: number[]) => {
    batches.push(items);
    await new Promise<void>((r) => gates.push(r));
    if (items.includes(-1)) throw new Error('bad batch');
    return items.map((i) => i * 10);
  };
  const release = async () => {
    while (gates.length === 0) await new Promise((r) => setImmediate(r));
    gates.shift()!();
    await new Promise((r) => setImmediate(r));
  };
  return { batches, run, release };
}

describe('Batcher', () => {
  it('group commit: what arrives while every slot is busy goes in one batch when a slot frees, each item with its own result', async () => {
    const g = gated();
    const b = new Batcher(g.run, { delayMs: 0, max: 100, concurrency: 1 });
    const first = b.add(1);
    await new Promise((r) => setImmediate(r));
    // arriving one event-loop turn apart, as a burst of arrivals does
    const rest: Promise<number>[] = [];
    for (const i of [2, 3, 4, 5, 6]) {
      rest.push(b.add(i));
      await new Promise((r) => setTimeout(r, 2));
    }
    expect(g.batches).toEqual([[1]]);
    await g.release();
    expect(await first).toBe(10);
    expect(g.batches).toEqual([[1], [2, 3, 4, 5, 6]]);
    await g.release();
    expect(await Promise.all(rest)).toEqual([20, 30, 40, 50, 60]);
  });

  it('keeps `max` per batch and `concurrency` batches at once', async () => {
    const g = gated();
    const b = new Batcher(g.run, { delayMs: 0, max: 2, concurrency: 2 });
    const all = [1, 2, 3, 4, 5, 6, 7].map((i) => b.add(i));
    // each full batch starts at once while a slot is free; 5-7 wait for one
    await new Promise((r) => setTimeout(r, 20));
    expect(g.batches).toEqual([[1, 2], [3, 4]]);
    await g.release();
    expect(g.batches).toEqual([[1, 2], [3, 4], [5, 6]]);
    await g.release();
    expect(g.batches).toEqual([[1, 2], [3, 4], [5, 6], [7]]);
    await g.release();
    await g.release();
    expect(await Promise.all(all)).toEqual([10, 20, 30, 40, 50, 60, 70]);
  });

  it("a failed batch rejects its own items only; the next batch runs; idle() waits for everything added", async () => {
    const g = gated();
    const b = new Batcher(g.run, { delayMs: 5, max: 100, concurrency: 1 });
    const bad = [b.add(-1), b.add(1)].map((p) => p.catch((err: Error) => err.message));
    await new Promise((r) => setTimeout(r, 20));
    const good = b.add(2);
    const idle = b.idle();
    await g.release();
    expect(await Promise.all(bad)).toEqual(['bad batch', 'bad batch']);
    await g.release();
    await idle;
    expect(await good).toBe(20);
    expect(g.batches).toEqual([[-1, 1], [2]]);
  });

  it('a freed slot honours delayMs: under a steady stream a batch waits for its oldest item to have waited delayMs, not for the slot alone', async () => {
    // each item is the time it was added; each batch takes 6 ms, far less than the 20 ms window
    const started: { at: number; items: number[] }[] = [];
    const b = new Batcher<number, void>(async (items) => {
      started.push({ at: performance.now(), items });
      await new Promise((r) => setTimeout(r, 6));
      return items.map(() => undefined);
    }, { delayMs: 20, max: 1000, concurrency: 2 });
    const until = performance.now() + 150;
    const all: Promise<void>[] = [];
    while (performance.now() < until) {
      all.push(b.add(performance.now()));
      await new Promise((r) => setTimeout(r, 1));
    }
    await Promise.all(all);
    expect(started.flatMap((s) => s.items)).toHaveLength(all.length);
    // a batch ending does not start the next at once (that would be a batch of the few items of its 6 ms, each time)
    for (const s of started) expect(s.at - s.items[0]).toBeGreaterThanOrEqual(19);
    expect(started.length).toBeLessThanOrEqual(Math.ceil(150 / 20) + 1);
  });
});
