import type { Redis } from '../../src/redis.js';
import type { Logger } from '../../src/logger.js';

/**
 * Cross-node broadcast of a lesson's frames over Redis pub/sub: one channel
 * per lesson, subscribed while this node has connections in it.
 *
 * Envelope: `<kind><node id>\n<payload>`; kind f = frame for every local
 * participant, h = hello (a node just subscribed). A node ignores its own
 * envelopes. ioredis keyPrefix does not apply to channels, so the channel
 * names carry REDIS_KEY_PREFIX themselves.
 */
export class LessonBus {
  private readonly sub: Redis;
  private readonly prefix: string;
  private readonly subscribed = new Map<string, Promise<void>>();

  constructor(
    private readonly pub: Redis,
    keyPrefix: string,
    private readonly nodeId: string,
    private readonly handlers: { frame(lessonId: string, frame: string): void; hello(lessonId: string): void },
    private readonly log: Logger,
  ) {
    this.prefix = `${keyPrefix}gw:bus:`;
    this.sub = pub.duplicate();
    this.sub.on('error', (err) => log.warn({ err: err.message }, 'bus redis error'));
    this.sub.on('message', (channel: string, message: string) => this.onMessage(channel, message));
  }

  /**
   * Subscribes to the lesson's channel and says hello, so nodes already there
   * publish to us. Resolves once subscribed: the hello (which only turns on
   * the other nodes' ephemeral frames for us) is not waited for.
   */
  subscribe(lessonId: string): Promise<void> {
    let p = this.subscribed.get(lessonId);
    if (!p) {
      p = this.sub.subscribe(this.prefix + lessonId).then(() => {
        this.pub.publish(this.prefix + lessonId, `h${this.nodeId}\n`).catch((err) => this.log.warn({ err: (err as Error).message, lesson_id: lessonId }, 'bus hello failed'));
      });
      p.catch((err) => {
        this.log.warn({ err: (err as Error).message, lesson_id: lessonId }, 'bus subscribe failed');
        this.subscribed.delete(lessonId);
      });
      this.subscribed.set(lessonId, p);
    }
    return p.catch(() => undefined);
  }

  unsubscribe(lessonId: string): void {
    if (!this.subscribed.delete(lessonId)) return;
    this.sub.unsubscribe(this.prefix + lessonId).catch(() => undefined);
  }

  /** Resolves to the number of subscribed connections that got it (1 = only this node). */
  async publish(lessonId: string, frame: string): Promise<number> {
    return this.pub.publish(this.prefix + lessonId, `f${this.nodeId}\n${frame}`);
  }

  async close(): Promise<void> {
    this.subscribed.clear();
    this.sub.disconnect();
  }

  private onMessage(channel: string, message: string): void {
    if (!channel.startsWith(this.prefix)) return;
    const nl = message.indexOf('\n');
    if (nl < 1) return;
    if (message.slice(1, nl) === this.nodeId) return;
    const lessonId = channel.slice(this.prefix.length);
    if (message[0] === 'f') this.handlers.frame(lessonId, message.slice(nl + 1));
    else if (message[0] === 'h') this.handlers.hello(lessonId);
  }
}
