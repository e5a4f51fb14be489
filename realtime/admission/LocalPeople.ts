import type { ClientConnection } from '../ClientConnection.js';
import { TokenBucket } from '../lib/TokenBucket.js';

/** One person's open sockets in one lesson on this node, oldest first, and what they share. */
export interface LocalPerson {
  readonly conns: ClientConnection[];
  /** the person's cursor budget on this node, whatever socket the cursor came on */
  readonly cursor: TokenBucket;
}

/**
 * The sockets of each person on this node (issue 14: limits per person, not
 * per socket). A person is a user of a lesson: every link the partner issued
 * to the same user shares one entry (the person's public id), so issuing
 * several links does not lift the cap. The cap is per node, like the per-IP
 * cap: counting across nodes would cost a Redis round trip per upgrade, and a
 * load balancer spreads one client's sockets over few nodes (docs/protocol.md).
 */
export class LocalPeople {
  private readonly people = new Map<string, LocalPerson>();

  constructor(
    private readonly maxSockets: number,
    /** cursors per second and burst per person (GATEWAY_PERSON_CURSORS_PER_SECOND: a pointer at 30 fps) */
    private readonly cursorRate: number,
    private readonly cursorBurst: number,
  ) {}

  /** Registers an open socket; returns the person's oldest sockets beyond the cap, for the caller to close. */
  add(conn: ClientConnection, now: number): ClientConnection[] {
    const key = this.key(conn.lessonId, conn.person.id);
    let p = this.people.get(key);
    if (!p) this.people.set(key, (p = { conns: [], cursor: new TokenBucket(this.cursorRate, this.cursorBurst, now) }));
    p.conns.push(conn);
    return p.conns.length > this.maxSockets ? p.conns.slice(0, p.conns.length - this.maxSockets) : [];
  }

  remove(conn: ClientConnection): void {
    const key = this.key(conn.lessonId, conn.person.id);
    const p = this.people.get(key);
    if (!p) return;
    const i = p.conns.indexOf(conn);
    if (i >= 0) p.conns.splice(i, 1);
    if (p.conns.length === 0) this.people.delete(key);
  }

  get(lessonId: string, personId: string): LocalPerson | undefined {
    return this.people.get(this.key(lessonId, personId));
  }

  private key(lessonId: string, personId: string): string {
    return `${lessonId}\n${personId}`;
  }
}
