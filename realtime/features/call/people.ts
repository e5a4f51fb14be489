import type { Presence } from '../../presence/Presence.js';

/** How long a lesson's list of people answers "yes, X is here" before it is read again. */
const FRESH_MS = 1000;
/** Reads of one lesson's list start at least this far apart (a stream of unknown ids costs at most 10 reads a second). */
const MIN_READ_GAP_MS = 100;

/**
 * Whether a person id is someone in the lesson, on any node: what `rtc.*`
 * needs to answer `error` `not_found` for an unknown `to` (docs/protocol.md,
 * "Video call"). Presence in Redis is the authority. A "yes" is served from a
 * list read within the last second, so ICE candidates (dozens per call
 * set-up) do not each cost a Redis script; a "no" is only ever answered from
 * a read that started after the message arrived, so a person who has just
 * joined is always found (reads of one lesson are at least 100 ms apart and
 * shared by the messages waiting for them).
 *
 * One per lesson open on this node, kept on its Lesson by the call feature: it goes when the
 * lesson closes here, and a lesson opening again starts with no list.
 */
export class LessonPeople {
  /** when the list was read (its read started), on the gateway's clock */
  private at = -Infinity;
  private ids = new Set<string>();
  /** the next read, shared by the messages that wait for it until it starts */
  private next: Promise<Set<string>> | undefined;
  /** the next read has started (a message arriving now needs a later one) */
  private nextStarted = true;
  /** when the last read started */
  private lastStart = -Infinity;

  constructor(
    private readonly lessonId: string,
    /** the gateway's presence */
    private readonly presence: Presence,
    /** the gateway's clock (deps.clock) */
    private readonly now: () => number,
  ) {}

  async has(personId: string): Promise<boolean> {
    const now = this.now();
    if (this.ids.has(personId) && now - this.at < FRESH_MS) return true;
    // A read that had started before this message might predate the person's arrival: wait for one that starts after it.
    if (!this.next || this.nextStarted) {
      this.nextStarted = false;
      const delay = Math.max(0, Math.min(MIN_READ_GAP_MS, this.lastStart + MIN_READ_GAP_MS - now));
      this.next = new Promise((r) => setTimeout(r, delay)).then(async () => {
        const at = this.now();
        this.nextStarted = true;
        this.lastStart = at;
        const { people } = await this.presence.people(this.lessonId);
        this.ids = new Set(people.map((p) => p.id));
        this.at = at;
        return this.ids;
      });
    }
    return (await this.next).has(personId);
  }
}
