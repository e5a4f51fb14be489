import { PARTICIPANT_REMOVED_CHANNEL } from '../../../src/db/channels.js';
import type { Sql } from '../../../src/db/index.js';
import { listenSurely } from '../../../src/db/listen.js';
import { recordRemoval } from '../../../src/domain/removals.js';
import type { Deps } from '../../../src/deps.js';
import { LINK_TTL_MINUTES_MAX, type ResolvedLink } from '../../../src/domain/links.js';
import { personIdOf } from '../../admission/personId.js';

/** A removal refuses links issued at or before it, and none lives longer than this: older removals refuse nothing. */
const RELEVANT_MS = LINK_TTL_MINUTES_MAX * 60_000;
/** Read a little further back than that: the node's clock and the database's differ. */
const RELEVANT_MARGIN_MS = 5 * 60_000;

/**
 * Removals by a teacher, durable in Postgres (migrations/007_board_wiring.sql):
 * a removed person's links to the lesson issued at or before the removal are
 * refused for as long as they would be valid; a link issued later works.
 *
 * The check runs on every upgrade and page load, so it reads Postgres only
 * where a removal can matter. Each node keeps who has a removal row, in every
 * lesson, for the removals that can still refuse a link: made within the
 * longest link lifetime (12 h). It reads them once when it starts and again
 * whenever its LISTEN connection (re)connects (a removal may have been missed
 * meanwhile), and keeps them current by the `participant_removed`
 * notification every removal sends in its own statement, and by the
 * remover's node directly. So a lesson's first arrival on a node waits for no
 * read (before, each lesson's first check read its rows). A person not in the
 * set is not removed: no read. A person in it (rare: a removed person coming
 * back) gets the exact check (their link issued at or before the removal?).
 * A removal heard over the bus first (the lesson's `heardClose`) is checked
 * exactly whatever the set says (`rumoured`).
 *
 * The bus is also the fast way a removed person's sockets on other nodes
 * close, and it is at most once: a node whose subscriber was reconnecting
 * would keep the person present, and the lesson metered. So every removal this
 * node hears from Postgres (the notification, or the set read again after a
 * reconnect) is handed to `onHeard` as well, and the teacher feature closes the
 * person's sockets here whose links it covers.
 */
export class Removals {
  /** lesson -> removed person (public id) -> when this node learnt of the removal, or its time if read (ms) */
  private removed = new Map<string, Map<string, number>>();
  /** the set being read after a (re)connect: what is heard meanwhile goes into both */
  private reading: Map<string, Map<string, number>> | undefined;
  /** settles once the set read at the last (re)connect is in place; undefined before start or after a failed read */
  private loaded: Promise<void> | undefined;
  /** entries kept after the last pruning (the set is pruned of removals past RELEVANT_MS as it grows) */
  private sizeAtPrune = 0;
  private size = 0;
  private unlisten: (() => Promise<void>) | undefined;
  /** statements run by checks and set reads (a figure for tests and benchmarks) */
  readsMade = 0;

  private readonly sql: Sql;
  /** the read pool (Deps.readSql) */
  private readonly reads: Sql;
  private readonly clock: Deps['clock'];

  constructor(deps: Pick<Deps, 'sql' | 'readSql' | 'clock'>) {
    this.sql = deps.sql;
    this.reads = deps.readSql;
    this.clock = deps.clock;
  }

  /**
   * Hears removals from now on; reads the set again on each (re)connect of the LISTEN connection.
   * `onHeard` gets every removal heard from Postgres: each notification, and each removal in a set
   * read again after a reconnect (one may have been missed while the connection was down).
   */
  async start(onHeard?: (lessonId: string, personId: string) => void): Promise<void> {
    const req = await listenSurely(
      this.sql,
      PARTICIPANT_REMOVED_CHANNEL,
      (payload) => {
        try {
          const n = JSON.parse(payload) as { lesson_id?: unknown; person_id?: unknown };
          if (typeof n.lesson_id === 'string' && typeof n.person_id === 'string') {
            this.heard(n.lesson_id, n.person_id);
            onHeard?.(n.lesson_id, n.person_id);
          }
        } catch {
          // not ours to crash on: a malformed notice is a missed one, and the exact check stays right for the rumoured
        }
      },
      () => {
        const read = this.read();
        // a failed read is handled where it is awaited (known()); this branch must not reject unhandled
        read.then(
          () => {
            if (onHeard) for (const [lessonId, people] of this.removed) for (const personId of people.keys()) onHeard(lessonId, personId);
          },
          () => undefined,
        );
        return read;
      },
    );
    this.unlisten = req.unlisten;
    // the first check waits for this read (known()); a failed one is tried again by the next check
    this.loaded ??= this.read();
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
    this.unlisten = undefined;
    this.removed.clear();
    this.loaded = undefined;
  }

  /** Records the removal (again: a later removal also refuses links issued in between) and announces it to every node. */
  async remove(lessonId: string, personId: string, by: string, at: Date): Promise<void> {
    await recordRemoval(this.sql, lessonId, personId, by, at);
    // this node knows before the sockets close, whatever the notification's timing
    this.heard(lessonId, personId);
  }

  /**
   * Whether the link's person was removed after the link was issued. `rumoured`: a removal of
   * the person was heard over the bus, so the exact check runs whatever this node's set says.
   */
  async isRemoved(link: ResolvedLink, rumoured = false): Promise<boolean> {
    const personId = personIdOf(link);
    if (!rumoured && !(await this.known()).get(link.lesson_id)?.has(personId)) return false;
    this.readsMade++;
    const rows = await this.reads`
      SELECT 1 FROM lesson_removals r JOIN links k ON k.id = ${link.link_id}
      WHERE r.lesson_id = ${link.lesson_id} AND r.person_id = ${personId}
        AND k.created_at <= r.removed_at`;
    return rows.length > 0;
  }

  /** The set, once read (read again if the last read failed: the check fails meanwhile, as a read would). */
  private known(): Promise<Map<string, Map<string, number>>> {
    const loaded = (this.loaded ??= this.read());
    return loaded.then(() => this.removed);
  }

  /**
   * Reads the removals that can still refuse a link into a new set; what is heard while the read
   * runs goes into both. Runs after LISTEN is in place, so nothing committed after the read's
   * snapshot goes unheard.
   */
  private read(): Promise<void> {
    const next = new Map<string, Map<string, number>>();
    this.reading = next;
    this.readsMade++;
    const since = new Date(this.clock.now().getTime() - RELEVANT_MS - RELEVANT_MARGIN_MS);
    const done = this.reads<{ lesson_id: string; person_id: string; removed_at: Date }[]>`
      SELECT lesson_id, person_id, removed_at FROM lesson_removals WHERE removed_at > ${since}`.then(
      (rows) => {
        for (const r of rows) add(next, r.lesson_id, r.person_id, r.removed_at.getTime());
        if (this.reading !== next) return; // a newer read replaced this one
        this.reading = undefined;
        this.removed = next;
        this.size = this.sizeAtPrune = count(next);
      },
      (err) => {
        if (this.loaded === done) this.loaded = undefined;
        if (this.reading === next) this.reading = undefined;
        throw err;
      },
    );
    done.catch(() => undefined);
    this.loaded = done;
    return done;
  }

  private heard(lessonId: string, personId: string): void {
    const now = this.clock.now().getTime();
    add(this.removed, lessonId, personId, now);
    if (this.reading) add(this.reading, lessonId, personId, now);
    if (++this.size > 2 * this.sizeAtPrune + 1_000) this.prune(now);
  }

  /** Drops the removals that can no longer refuse a valid link. */
  private prune(now: number): void {
    for (const [lesson, people] of this.removed) {
      for (const [person, at] of people) if (at < now - RELEVANT_MS - RELEVANT_MARGIN_MS) people.delete(person);
      if (people.size === 0) this.removed.delete(lesson);
    }
    this.size = this.sizeAtPrune = count(this.removed);
  }
}

function add(set: Map<string, Map<string, number>>, lessonId: string, personId: string, at: number): void {
  let people = set.get(lessonId);
  if (!people) set.set(lessonId, (people = new Map()));
  people.set(personId, Math.max(at, people.get(personId) ?? 0));
}

function count(set: Map<string, Map<string, number>>): number {
  let n = 0;
  for (const people of set.values()) n += people.size;
  return n;
}
