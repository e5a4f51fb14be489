import type { Presence } from '../../presence/Presence.js';

/** How long a lesson's list of people answers "yes, X is here" before it is read again. */
const FRESH_MS = 1000;
/** Reads of one lesson's list start at least this far apart (a stream of unknown ids costs at most 10 reads a second). */
const MIN_READ_GAP_MS = 100;
const MAX_LESSONS = 10_000;

interface Entry {
  /** when the list was read (its read started), on the gateway's clock */
  at: number;
  ids: Set<string>;
  /** the next read, shared by the messages that wait for it until it starts */
  next?: Promise<Set<string>>;
  /** the next read has started (a message arriving now needs a later one) */
  nextStarted: boolean;
  /** when the last read started */
  lastStart: number;
}

/**
 * Whether a person id is someone in the lesson, on any node: what `rtc.*`
 * needs to answer `error` `not_found` for an unknown `to` (docs/protocol.md,
 * "Video call"). Presence in Redis is the authority. A "yes" is served from a
 * list read within the last second, so ICE candidates (dozens per call
 * set-up) do not each cost a Redis script; a "no" is only ever answered from
 * a read that started after the message arrived, so a person who has just
 * joined is always found (reads of one lesson are at least 100 ms apart and
 * shared by the messages waiting for them).
 */
export class LessonPeople {
  private readonly lessons = new Map<string, Entry>();

  constructor(
    /** the gateway's presence */
    private readonly presence: Presence,
    /** the gateway's clock (deps.clock) */
    private readonly now: () => number,
  ) {}

  async has(lessonId: string, personId: string): Promise<boolean> {
    const now = this.now();
    let e = this.lessons.get(lessonId);
    if (!e) {
      if (this.lessons.size >= MAX_LESSONS) this.lessons.delete(this.lessons.keys().next().value!);
      e = { at: -Infinity, ids: new Set(), nextStarted: true, lastStart: -Infinity };
      this.lessons.set(lessonId, e);
    }
    if (e.ids.has(personId) && now - e.at < FRESH_MS) return true;
    // A read that had started before this message might predate the person's arrival: wait for one that starts after it.
    if (!e.next || e.nextStarted) {
      const entry = e;
      entry.nextStarted = false;
      const delay = Math.max(0, Math.min(MIN_READ_GAP_MS, entry.lastStart + MIN_READ_GAP_MS - now));
      entry.next = new Promise((r) => setTimeout(r, delay)).then(async () => {
        const at = this.now();
        entry.nextStarted = true;
        entry.lastStart = at;
        const { people } = await this.presence.people(lessonId);
        entry.ids = new Set(people.map((p) => p.id));
        entry.at = at;
        return entry.ids;
      });
    }
    return (await e.next!).has(personId);
  }
}
