import type { ClientConnection } from '../ClientConnection.js';

/**
 * How far this node vouches for the presence of its sockets in a lesson: the
 * periodic flush may charge a lesson only up to the earliest such time over
 * every node with people in it (realtime/presence/lua.ts TICK).
 *
 * A present socket is certainly there until one keepalive cycle after its last
 * sign of life (a live silent socket answers a ping every cycle); one that went
 * half-open stops answering, and its departure, found later by the idle
 * timeout, is dated exactly there (Gateway.closed). A departure that presence
 * has not heard yet (in flight, waiting out a drain's grace, or waiting for
 * Redis) is dated at its own time. Charging past the earliest of these could
 * bill seconds the later departure takes back, and a watermark cannot go down.
 */
export class Certainty {
  /** lesson id -> departures not yet reported to presence -> their date */
  private readonly unreported = new Map<string, Map<ClientConnection, number>>();

  constructor(private readonly cycleMs: number) {}

  /** The socket closed; its departure, dated `at`, is on its way to presence. */
  departing(conn: ClientConnection, at: number): void {
    let m = this.unreported.get(conn.lessonId);
    if (!m) this.unreported.set(conn.lessonId, (m = new Map()));
    m.set(conn, at);
  }

  /** Presence heard the departure (or never will: shutdown). */
  reported(conn: ClientConnection): void {
    const m = this.unreported.get(conn.lessonId);
    if (m?.delete(conn) && m.size === 0) this.unreported.delete(conn.lessonId);
  }

  /** Presence in `lessonId` of the sockets `present` here is certain up to the returned time (<= now). */
  until(lessonId: string, present: Iterable<ClientConnection>, now: number): number {
    let t = now;
    for (const c of present) if (c.lastSeenAt + this.cycleMs < t) t = c.lastSeenAt + this.cycleMs;
    const m = this.unreported.get(lessonId);
    if (m) for (const at of m.values()) if (at < t) t = at;
    return t;
  }
}
