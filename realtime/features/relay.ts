import type { Redis } from 'ioredis';
import type { Logger } from '../../src/logger.js';
import type { CloseCodeName } from '../protocol/closeCodes.js';

/** What one node asks the others to do for one person of a lesson. */
export type PersonCommand =
  /** send this frame to the person's connections (WebRTC signalling, `muted`) */
  | { to: string; frame: string }
  /** close the person's connections with this code (removal) */
  | { to: string; close: CloseCodeName };

interface Envelope {
  /** sending node: it delivered locally already and ignores its own message */
  n: string;
  c: PersonCommand;
}

/**
 * Person-addressed messages between gateway nodes. The gateway's own bus
 * (GatewayApi.broadcast) reaches everyone in a lesson; signalling and teacher
 * actions are for one person, whose sockets may be on any node. One Redis
 * pub/sub channel per lesson, `<REDIS_KEY_PREFIX>lesson:<id>:person`,
 * subscribed while this node has connections in the lesson (reference
 * counted). Nothing here is durable: a lost message is a lost ICE candidate
 * or mute notice, never board content; removal is durable in Postgres first.
 */
export class PersonRelay {
  private readonly sub: Redis;
  private readonly refs = new Map<string, { n: number; ready: Promise<void> }>();
  private readonly prefix: string;

  constructor(
    private readonly pub: Redis,
    keyPrefix: string,
    private readonly nodeId: string,
    private readonly deliver: (lessonId: string, cmd: PersonCommand) => void,
    private readonly log: Logger,
  ) {
    this.prefix = `${keyPrefix}lesson:`;
    this.sub = pub.duplicate();
    this.sub.on('error', (err) => log.warn({ err: err.message }, 'person relay: redis error'));
    this.sub.on('message', (channel: string, message: string) => this.onMessage(channel, message));
  }

  private channel(lessonId: string): string {
    return `${this.prefix}${lessonId}:person`;
  }

  /** Starts listening for the lesson (first local connection); resolves once subscribed. */
  subscribe(lessonId: string): Promise<void> {
    const r = this.refs.get(lessonId);
    if (r) {
      r.n++;
      return r.ready;
    }
    const entry = { n: 1, ready: this.sub.subscribe(this.channel(lessonId)).then(() => undefined) };
    this.refs.set(lessonId, entry);
    entry.ready.catch(() => {
      if (this.refs.get(lessonId) === entry) this.refs.delete(lessonId);
    });
    return entry.ready;
  }

  unsubscribe(lessonId: string): void {
    const r = this.refs.get(lessonId);
    if (!r || --r.n > 0) return;
    this.refs.delete(lessonId);
    this.sub.unsubscribe(this.channel(lessonId)).catch(() => undefined);
  }

  /** Sends to the other nodes (the caller delivers locally). Fire and forget. */
  publish(lessonId: string, cmd: PersonCommand): void {
    const env: Envelope = { n: this.nodeId, c: cmd };
    this.pub.publish(this.channel(lessonId), JSON.stringify(env)).catch((err: Error) => {
      this.log.warn({ err: err.message, lesson_id: lessonId }, 'person relay: publish failed');
    });
  }

  close(): void {
    this.refs.clear();
    this.sub.disconnect();
  }

  private onMessage(channel: string, message: string): void {
    if (!channel.startsWith(this.prefix) || !channel.endsWith(':person')) return;
    const lessonId = channel.slice(this.prefix.length, -':person'.length);
    try {
      const env = JSON.parse(message) as Envelope;
      if (env.n !== this.nodeId) this.deliver(lessonId, env.c);
    } catch (err) {
      this.log.warn({ err: String(err) }, 'person relay: unreadable message');
    }
  }
}
