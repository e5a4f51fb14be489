import type { ClientConnection } from './ClientConnection.js';

/**
 * Delivery to the connections of a lesson on this node. The uWS transport
 * provides one built on uWS topics (the fan-out loop runs in C++); without
 * it the room loops over its connections.
 */
export interface Fanout {
  /** the connection starts receiving its lesson's frames */
  subscribe(conn: ClientConnection): void;
  publish(lessonId: string, frame: string, except?: ClientConnection): void;
}

/** Presence frames kept to replay to a connection that registered while they were in flight. */
const RECENT_PRESENCE = 32;

/**
 * One lesson on this node: its local connections and local delivery.
 * Presence and metering across nodes are not here (Presence, Meter); this is
 * what one node does for the people connected to it.
 */
export class LessonRoom {
  readonly conns = new Set<ClientConnection>();
  /**
   * Whether another node may have people in this lesson: ephemeral frames
   * (cursors) go to the bus only then. Set by a PUBLISH that reached more than
   * our own subscription, or by another node's hello; cleared by a PUBLISH
   * that reached only us.
   */
  remoteListeners = true;
  /** resolves once this node listens to the lesson's bus channel */
  busReady: Promise<void> = Promise.resolve();
  private readonly recent: { seq: number; frame: string }[] = [];

  constructor(
    readonly lessonId: string,
    private readonly fanout?: Fanout,
  ) {}

  present(): ClientConnection[] {
    return [...this.conns].filter((c) => c.state === 'present');
  }

  /** Delivers to every present connection here except `except`. */
  deliver(frame: string, except?: ClientConnection): void {
    if (this.fanout) {
      this.fanout.publish(this.lessonId, frame, except);
      return;
    }
    for (const c of this.conns) if (c !== except && c.state === 'present') c.send(frame);
  }

  /** A presence frame (with its Redis seq) to deliver now and remember for late registrants. */
  deliverPresence(seq: number, frame: string, except?: ClientConnection): void {
    this.recent.push({ seq, frame });
    if (this.recent.length > RECENT_PRESENCE) this.recent.shift();
    this.deliver(frame, except);
  }

  /**
   * The connection becomes present: `welcome` first, then the presence frames
   * newer than the welcome's seq that passed while it was registering (Redis
   * replies and pub/sub messages travel on different connections), then live
   * delivery. All synchronous, so nothing falls in between.
   */
  makePresent(conn: ClientConnection, welcome: string, seq: number): void {
    conn.state = 'present';
    conn.send(welcome);
    for (const r of this.recent) if (r.seq > seq) conn.send(r.frame);
    this.fanout?.subscribe(conn);
  }
}
