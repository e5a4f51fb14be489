import { duplicateRedis, isCluster, type Redis } from '../../src/redis.js';
import type { Logger } from '../../src/logger.js';
import type { Bus } from './Bus.js';

/**
 * Everything one node tells the other nodes about a lesson, in one envelope
 * (hocuspocus's Redis extension is the model). The core kinds:
 *
 * - `frame`    a frame for everyone present (but `exceptPerson`'s sockets); kept for
 *              connections still registering (Lesson: KEPT_FRAMES)
 * - `ephemeral` the same for a frame that may be dropped (cursors, strokes): never kept
 * - `presence` a presence frame with its Redis `seq` (replayed to late registrants)
 * - `person`   a frame for one person (`toPerson`), or one of their connections (`toConn`)
 * - `close`    close one person's sockets; the payload is the close code's name
 * - `hello`    a node just subscribed (turns on the others' ephemeral frames for it)
 *
 * Any other kind belongs to a feature (`board`: committed board operations)
 * and is handed to the feature's `onBus` hook.
 */
export interface Envelope {
  /** sending node: it delivered locally already and ignores its own envelopes */
  node: string;
  kind: string;
  exceptPerson?: string;
  toPerson?: string;
  toConn?: string;
  /** the presence seq of a `presence` frame */
  seq?: number;
  payload: string;
}

export type Outgoing = Omit<Envelope, 'node'>;

/**
 * Wire form: `node \t kind \t exceptPerson \t toPerson \t toConn \t seq \n payload`.
 * A header of plain fields, so a cursor frame relayed at 30 per second per
 * person costs a split, not a JSON parse; the payload (usually a frame
 * already serialised for the sockets) is passed on untouched. No header field
 * can hold a tab or a newline: node ids are host:pid:random, person ids
 * base64url, kinds our own words.
 */
export function encodeEnvelope(e: Envelope): string {
  return `${e.node}\t${e.kind}\t${e.exceptPerson ?? ''}\t${e.toPerson ?? ''}\t${e.toConn ?? ''}\t${e.seq ?? ''}\n${e.payload}`;
}

export function decodeEnvelope(message: string): Envelope | undefined {
  const nl = message.indexOf('\n');
  if (nl < 0) return undefined;
  const h = message.slice(0, nl).split('\t');
  if (h.length !== 6 || !h[0] || !h[1]) return undefined;
  return {
    node: h[0],
    kind: h[1],
    exceptPerson: h[2] || undefined,
    toPerson: h[3] || undefined,
    toConn: h[4] || undefined,
    seq: h[5] ? Number(h[5]) : undefined,
    payload: message.slice(nl + 1),
  };
}

/**
 * The one cross-node channel of each lesson: `<REDIS_KEY_PREFIX>gw:lesson:{<id>}`,
 * subscribed by the Lesson object while the lesson is open on this node
 * (realtime/lesson/Lesson.ts), on one subscriber connection per node. ioredis
 * keyPrefix does not apply to channels, so the names carry the prefix.
 * On a Redis Cluster the channels are sharded (SSUBSCRIBE/SPUBLISH, Redis 7):
 * a message goes to the master of the channel's slot only (the lesson's, by
 * its hash tag), not to every node of the cluster as plain PUBLISH would; the
 * subscriber is then one connection per master (ioredis shardedSubscribers).
 * A single Redis keeps plain pub/sub.
 * Nothing here is durable: board operations are in Postgres first (a node
 * that misses one resyncs its pages), presence is in Redis.
 */
export class LessonBus implements Bus {
  receiver: (lessonId: string, e: Envelope) => void = () => {};
  private readonly sub: Redis;
  private readonly prefix: string;
  private readonly sharded: boolean;
  /** what a lesson's channel name starts with, as given to Redis (see channel()) */
  private readonly channelBase: string;
  private readonly subscribed = new Map<string, Promise<void>>();
  /** publishes in flight: Gateway.idle() waits for them */
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    private readonly pub: Redis,
    keyPrefix: string,
    readonly nodeId: string,
    private readonly log: Logger,
  ) {
    this.prefix = `${keyPrefix}gw:lesson:`;
    this.sharded = isCluster(pub);
    this.channelBase = this.sharded ? 'gw:lesson:' : this.prefix;
    this.sub = duplicateRedis(pub, { shardedSubscribers: this.sharded });
    this.sub.on('error', (err: Error) => log.warn({ err: err.message }, 'bus redis error'));
    this.sub.on(this.sharded ? 'smessage' : 'message', (channel: string, message: string) => this.onMessage(channel, message));
  }

  /** Subscribes to the lesson's channel and says hello; resolves once subscribed, rejects if Redis refused. */
  subscribe(lessonId: string): Promise<void> {
    let p = this.subscribed.get(lessonId);
    if (!p) {
      const channel = this.channel(lessonId);
      const created = (this.sharded ? this.sub.ssubscribe(channel) : this.sub.subscribe(channel)).then(() => {
        void this.publish(lessonId, { kind: 'hello', payload: '' }).catch(() => undefined);
      });
      created.catch((err) => {
        this.log.warn({ err: (err as Error).message, lesson_id: lessonId }, 'bus subscribe failed');
        if (this.subscribed.get(lessonId) === created) this.subscribed.delete(lessonId);
      });
      this.subscribed.set(lessonId, (p = created));
    }
    return p;
  }

  unsubscribe(lessonId: string): Promise<void> {
    if (!this.subscribed.delete(lessonId)) return Promise.resolve();
    const channel = this.channel(lessonId);
    return (this.sharded ? this.sub.sunsubscribe(channel) : this.sub.unsubscribe(channel)).then(
      () => undefined,
      () => undefined,
    );
  }

  /** Resolves to the number of subscriptions that got it (1 = only this node). */
  publish(lessonId: string, e: Outgoing): Promise<number> {
    const channel = this.channel(lessonId);
    const message = encodeEnvelope({ ...e, node: this.nodeId });
    const p: Promise<number> = this.sharded ? (this.pub.spublish(channel, message) as Promise<number>) : this.pub.publish(channel, message);
    this.inFlight.add(p);
    void p.then(
      () => this.inFlight.delete(p),
      () => this.inFlight.delete(p),
    );
    return p;
  }

  /** Waits for the publishes in flight (settled either way). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  async close(): Promise<void> {
    await this.idle();
    this.subscribed.clear();
    this.sub.disconnect();
  }

  /**
   * `<prefix>gw:lesson:{<id>}`: the braces make a cluster shard the channel by the lesson, like its keys.
   * ioredis applies keyPrefix to the channel of SSUBSCRIBE/SPUBLISH (the channel is their key), not of
   * SUBSCRIBE/PUBLISH: sharded, the prefix is left to it.
   */
  private channel(lessonId: string): string {
    return `${this.channelBase}{${lessonId}}`;
  }

  private onMessage(channel: string, message: string): void {
    if (!channel.startsWith(this.prefix)) return;
    const e = decodeEnvelope(message);
    if (!e || e.node === this.nodeId) return;
    this.receiver(channel.slice(this.prefix.length + 1, -1), e);
  }
}
