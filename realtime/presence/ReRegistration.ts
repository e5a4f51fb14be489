import type { Logger } from '../../src/logger.js';
import type { Lesson } from '../lesson/Lesson.js';
import { mapLimit } from '../lib/KeyedQueue.js';
import type { Meter } from '../metering/Meter.js';
import { presenceSyncFrame } from '../protocol/serverMessages.js';
import type { Presence, PublicPerson } from './Presence.js';

/** What re-registration needs of the gateway. */
export interface RegisteringGateway {
  readonly nodeId: string;
  readonly log: Logger;
  readonly presence: Presence;
  readonly meter: Meter;
  now(): number;
  lesson(lessonId: string): Lesson | undefined;
  lessons(): Iterable<Lesson>;
  /** a presence event to the lesson's sockets here and on the other nodes */
  presenceEvent(lessonId: string, event: 'joined', person: PublicPerson, seq: number, count: number, opts: { exceptPerson: string }): void;
  /** an attendance mark */
  mark(lessonId: string, personId: string, joined: boolean, linkId: string | null, at: number): void;
}

/**
 * Redis lost this node's registrations (flush, restart, or the node was
 * reaped after a stall): every live connection is registered again. The live
 * connections are the truth; no participant.joined is recorded for them again.
 * One run at a time; a caller during a run waits for it.
 */
export class ReRegistration {
  private running: Promise<void> | undefined;

  constructor(private readonly gw: RegisteringGateway) {}

  /** All lessons open here, or these. */
  run(onlyLessons?: string[]): Promise<void> {
    if (this.running) return this.running;
    const gw = this.gw;
    const lessons = onlyLessons ? onlyLessons.map((id) => gw.lesson(id)).filter((l): l is Lesson => !!l) : [...gw.lessons()];
    if (lessons.length === 0) return Promise.resolve();
    gw.log.warn({ lessons: lessons.length }, 're-registering live connections');
    this.running = mapLimit(lessons, 8, (l) => this.lesson(l))
      .then(() => undefined)
      .finally(() => (this.running = undefined));
    return this.running;
  }

  private async lesson(lesson: Lesson): Promise<void> {
    const gw = this.gw;
    for (const conn of lesson.present()) {
      const now = gw.now();
      const res = await gw.presence.join(lesson.id, { now, node: gw.nodeId, conn: conn.id, person: conn.userHash, info: conn.person, rejoin: true });
      void gw.meter.apply(lesson.id, res, now);
      // the others may have dropped them meanwhile (a sync from a node that re-registered first); they themselves never left
      if (res.first) {
        gw.presenceEvent(lesson.id, 'joined', conn.person, res.meter?.seq ?? 0, res.count, { exceptPerson: conn.person.id });
        gw.mark(lesson.id, conn.person.id, true, conn.link.link_id, now);
      }
    }
    // Whoever left while Redis was away is not in Redis any more: resend the whole list.
    const { people, seq } = await gw.presence.people(lesson.id);
    lesson.deliver(presenceSyncFrame(people, seq));
  }
}
