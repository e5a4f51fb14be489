import { BoardService } from '../../src/board/service.js';
import type { Deps } from '../../src/deps.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import type { Logger } from '../../src/logger.js';
import type { ClientConnection } from '../ClientConnection.js';
import type { CloseCodeName } from '../protocol/closeCodes.js';
import { BoardFanout } from './board/fanout.js';
import { PersonRelay, type PersonCommand } from './relay.js';

/** One lesson on this node, as the lesson features see it. */
export interface LocalLesson {
  readonly id: string;
  /** connections from the welcome hook on (admitting or present) until closed */
  readonly conns: Set<ClientConnection>;
  readonly fanout: BoardFanout;
  /** settles once the board feed and the person relay of the lesson are live on this node */
  ready: Promise<void>;
  release?: () => void;
}

/** How long a node remembers a removal it heard, to catch a connection whose upgrade was already past the check. */
const RECENT_REMOVAL_MS = 60_000;
const SWEEP_MS = 30_000;

/**
 * What the lesson features share on one gateway node: the BoardService, the
 * person relay between nodes, and the lessons with connections here.
 *
 * A connection enters in the `welcome` hook, before it is present: the
 * lesson's board feed (one BoardService listener per lesson per node) and its
 * relay subscription are live before the page can send anything, so no ack
 * or signal can be missed. It leaves in `onClosed`; a sweep also drops
 * connections that closed without it (the gateway skips onClosed when Redis
 * was unreachable at the departure).
 */
export class LessonHub {
  readonly board: BoardService;
  readonly relay: PersonRelay;
  readonly nodeId = randomBase62(12);
  private readonly lessons = new Map<string, LocalLesson>();
  private readonly removed = new Map<string, number>();
  private readonly sweeper: NodeJS.Timeout;
  readonly log: Logger;

  constructor(
    readonly deps: Deps,
    /** re-checks Postgres for a person a removal was heard for (the teacher feature's store) */
    private readonly isRemoved: (conn: ClientConnection) => Promise<boolean>,
  ) {
    this.log = deps.log.child({ component: 'lesson-features' });
    this.board = new BoardService(deps);
    this.relay = new PersonRelay(deps.redis, deps.config.REDIS_KEY_PREFIX, this.nodeId, (lessonId, cmd) => this.deliver(lessonId, cmd), this.log);
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  /** The welcome hook: the connection's lesson is live here before the connection is present. */
  async enter(conn: ClientConnection): Promise<void> {
    let lesson = this.lessons.get(conn.lessonId);
    if (!lesson) {
      const l: LocalLesson = { id: conn.lessonId, conns: new Set(), fanout: new BoardFanout(() => this.present(l.id)), ready: Promise.resolve() };
      l.ready = this.open(l);
      l.ready.catch(() => {
        if (this.lessons.get(l.id) === l) this.lessons.delete(l.id);
      });
      this.lessons.set(l.id, (lesson = l));
    }
    lesson.conns.add(conn);
    try {
      await lesson.ready;
    } catch (err) {
      lesson.conns.delete(conn);
      throw err;
    }
    // In the set from here on, so a removal heard from now closes it; one heard before is checked now.
    if (this.removed.has(this.key(conn.lessonId, conn.person.id)) && (await this.isRemoved(conn))) conn.close('forbidden');
  }

  private async open(l: LocalLesson): Promise<void> {
    await this.relay.subscribe(l.id);
    try {
      const sub = await this.board.join(l.id, l.fanout);
      l.release = () => {
        sub.leave();
        this.relay.unsubscribe(l.id);
      };
    } catch (err) {
      this.relay.unsubscribe(l.id);
      throw err;
    }
  }

  exit(conn: ClientConnection): void {
    const l = this.lessons.get(conn.lessonId);
    if (!l || !l.conns.delete(conn)) return;
    l.fanout.forget(conn);
    if (l.conns.size === 0) this.drop(l);
  }

  private drop(l: LocalLesson): void {
    if (this.lessons.get(l.id) === l) this.lessons.delete(l.id);
    void l.ready.then(() => l.release?.(), () => undefined);
    this.board.lessonLeft(l.id);
  }

  lesson(lessonId: string): LocalLesson | undefined {
    return this.lessons.get(lessonId);
  }

  /** Connections of the lesson on this node that got `welcome`. */
  present(lessonId: string): ClientConnection[] {
    const l = this.lessons.get(lessonId);
    if (!l) return [];
    const out: ClientConnection[] = [];
    for (const c of l.conns) if (c.state === 'present') out.push(c);
    return out;
  }

  /** Sends a frame to one person's connections in the lesson, on every node. */
  toPerson(lessonId: string, personId: string, frame: string): void {
    this.deliver(lessonId, { to: personId, frame });
    this.relay.publish(lessonId, { to: personId, frame });
  }

  /** Closes one person's connections in the lesson, on every node (and those about to be admitted). */
  closePerson(lessonId: string, personId: string, code: CloseCodeName): void {
    this.deliver(lessonId, { to: personId, close: code });
    this.relay.publish(lessonId, { to: personId, close: code });
  }

  private deliver(lessonId: string, cmd: PersonCommand): void {
    if ('close' in cmd && cmd.close === 'forbidden') {
      this.removed.set(this.key(lessonId, cmd.to), Date.now());
      if (this.removed.size > 10_000) this.removed.delete(this.removed.keys().next().value!);
    }
    const l = this.lessons.get(lessonId);
    if (!l) return;
    for (const c of l.conns) {
      if (c.person.id !== cmd.to || c.state === 'closed') continue;
      if ('close' in cmd) c.close(cmd.close);
      else if (c.state === 'present') c.send(cmd.frame);
    }
  }

  private key(lessonId: string, personId: string): string {
    return `${lessonId}\n${personId}`;
  }

  /** Drops connections that closed without onClosed, lessons left empty, and old removal notes. */
  sweep(): void {
    for (const l of [...this.lessons.values()]) {
      for (const c of l.conns) {
        if (c.state !== 'closed') continue;
        l.conns.delete(c);
        l.fanout.forget(c);
      }
      if (l.conns.size === 0) this.drop(l);
    }
    const old = Date.now() - RECENT_REMOVAL_MS;
    for (const [k, at] of this.removed) if (at < old) this.removed.delete(k);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    await this.board.close();
    this.relay.close();
    this.lessons.clear();
  }
}
