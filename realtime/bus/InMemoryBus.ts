import type { Bus } from './Bus.js';
import type { Envelope, Outgoing } from './LessonBus.js';

/** The nodes of one process that hear each other: one hub per simulated deployment. */
export class BusHub {
  readonly channels = new Map<string, Set<InMemoryBus>>();
}

/**
 * A Bus between gateways in one process, for unit tests that run the core
 * without Redis. Delivery is asynchronous (a later turn of the event loop),
 * as Redis pub/sub is, so code that relied on a synchronous hand-off fails
 * here as it would in production.
 */
export class InMemoryBus implements Bus {
  receiver: (lessonId: string, e: Envelope) => void = () => {};
  private readonly inFlight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    private readonly hub: BusHub,
    readonly nodeId: string,
  ) {}

  subscribe(lessonId: string): Promise<void> {
    if (this.closed) return Promise.reject(new Error('bus closed'));
    let subs = this.hub.channels.get(lessonId);
    if (!subs) this.hub.channels.set(lessonId, (subs = new Set()));
    if (subs.has(this)) return Promise.resolve();
    subs.add(this);
    void this.publish(lessonId, { kind: 'hello', payload: '' });
    return Promise.resolve();
  }

  unsubscribe(lessonId: string): Promise<void> {
    const subs = this.hub.channels.get(lessonId);
    if (subs?.delete(this) && subs.size === 0) this.hub.channels.delete(lessonId);
    return Promise.resolve();
  }

  publish(lessonId: string, e: Outgoing): Promise<number> {
    const envelope: Envelope = { ...e, node: this.nodeId };
    const p = new Promise<number>((resolve) =>
      setImmediate(() => {
        const subs = [...(this.hub.channels.get(lessonId) ?? [])];
        for (const bus of subs) if (bus !== this) bus.receiver(lessonId, envelope);
        resolve(subs.length);
      }),
    );
    this.inFlight.add(p);
    void p.then(() => this.inFlight.delete(p));
    return p;
  }

  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  async close(): Promise<void> {
    await this.idle();
    this.closed = true;
    for (const lessonId of [...this.hub.channels.keys()]) void this.unsubscribe(lessonId);
  }
}
