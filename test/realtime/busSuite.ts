import { describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/lib/crypto.js';
import type { Bus } from '../../realtime/bus/Bus.js';
import type { Envelope } from '../../realtime/bus/LessonBus.js';
import { eventually } from '../helpers/wait.js';

/** Nodes on one bus: `node(id)` makes one more gateway's end of it. */
export type BusFactory = () => { node(id: string): Bus; close(): Promise<void> };

const lesson = () => `lsn_${randomBase62(10)}`;

/** A node's end of the bus with what it received, per lesson. */
function listen(bus: Bus) {
  const got: { lessonId: string; e: Envelope }[] = [];
  bus.receiver = (lessonId, e) => void got.push({ lessonId, e });
  const of = (lessonId: string, kind?: string) => got.filter((g) => g.lessonId === lessonId && (!kind || g.e.kind === kind)).map((g) => g.e);
  return { bus, got, of };
}

/** Nodes `na` and `nb`, both subscribed to `n` new lessons. */
async function subscribed(f: ReturnType<BusFactory>, n: number) {
  const a = listen(f.node('na'));
  const b = listen(f.node('nb'));
  const lessons = Array.from({ length: n }, lesson);
  for (const l of lessons) {
    await a.bus.subscribe(l);
    await b.bus.subscribe(l);
  }
  return { a, b, lessons };
}

/**
 * The Bus contract (realtime/bus/Bus.ts), run against every implementation:
 * LessonBus over Redis and InMemoryBus. What the gateway relies on when it
 * relays a lesson's frames between nodes.
 */
export function busSuite(name: string, factory: BusFactory): void {
  describe(`the lesson bus (${name})`, () => {
    it("delivers a lesson's envelope to the other subscribed nodes, whole, never back to its sender, and counts the subscribers", async () => {
      const f = factory();
      const [a, b, c] = ['na', 'nb', 'nc'].map((id) => listen(f.node(id)));
      const l = lesson();
      await a.bus.subscribe(l);
      await b.bus.subscribe(l);
      const n = await a.bus.publish(l, { kind: 'frame', exceptPerson: 'p1', toPerson: 'p2', toConn: 'c9', seq: 7, payload: '{"type":"chat","text":"a\\tb\\nc"}' });
      expect(n).toBe(2);
      await eventually(async () => b.of(l, 'frame').length === 1);
      expect(b.of(l, 'frame')[0]).toEqual({ node: 'na', kind: 'frame', exceptPerson: 'p1', toPerson: 'p2', toConn: 'c9', seq: 7, payload: '{"type":"chat","text":"a\\tb\\nc"}' });
      await a.bus.idle();
      expect(a.of(l, 'frame')).toEqual([]);
      expect(c.of(l)).toEqual([]); // not subscribed
      await f.close();
    });

    it('says hello to the nodes already subscribed when a node subscribes', async () => {
      const f = factory();
      const a = listen(f.node('na'));
      const b = listen(f.node('nb'));
      const l = lesson();
      await a.bus.subscribe(l);
      await b.bus.subscribe(l);
      await eventually(async () => a.of(l, 'hello').length === 1);
      expect(a.of(l, 'hello')[0].node).toBe('nb');
      await f.close();
    });

    it('keeps lessons apart, and stops delivering a lesson once the node unsubscribed', async () => {
      const f = factory();
      const { a, b, lessons: [l1, l2] } = await subscribed(f, 2);
      await b.bus.unsubscribe(l1);
      // the later publish on l2 arriving proves the earlier one on l1 was not delivered (one channel order per node)
      await a.bus.publish(l1, { kind: 'frame', payload: 'one' });
      await a.bus.publish(l2, { kind: 'frame', payload: 'two' });
      await eventually(async () => b.of(l2, 'frame').length === 1);
      expect(b.of(l1, 'frame')).toEqual([]);
      expect(b.of(l2, 'frame').map((e) => e.payload)).toEqual(['two']);
      await f.close();
    });

    it("delivers one node's envelopes of a lesson in the order they were published", async () => {
      const f = factory();
      const { a, b, lessons: [l] } = await subscribed(f, 1);
      for (let i = 0; i < 50; i++) void a.bus.publish(l, { kind: 'frame', payload: String(i) });
      await a.bus.idle();
      await eventually(async () => b.of(l, 'frame').length === 50);
      expect(b.of(l, 'frame').map((e) => Number(e.payload))).toEqual([...Array(50).keys()]);
      await f.close();
    });
  });
}
