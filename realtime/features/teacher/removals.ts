import { PARTICIPANT_REMOVED_CHANNEL } from '../../../src/db/channels.js';
import type { Sql } from '../../../src/db/index.js';
import type { Deps } from '../../../src/deps.js';
import type { ResolvedLink } from '../../../src/domain/links.js';
import { Batcher } from '../../../src/lib/Batcher.js';
import { personIdOf } from '../../Gateway.js';

/** Lessons whose removals this node keeps (oldest dropped first; a dropped one is read again when needed). */
const LESSONS_MAX = 20_000;
/** First checks of lessons arriving within this many ms share one statement (a class arriving). */
const LOAD_BATCH_MS = 1;
const LOAD_BATCH_MAX = 100;

const NOBODY: ReadonlySet<string> = new Set();

/** What this node knows of one lesson's removals: the people with a removal row, once read. */
interface Known {
  /** removed people (public ids); undefined while there are none */
  persons?: Set<string>;
  /** set while the lesson's rows are being read */
  ready?: Promise<void>;
}

/**
 * Removals by a teacher, durable in Postgres (migrations/007_board_wiring.sql):
 * a removed person's links to the lesson issued at or before the removal are
 * refused for as long as they would be valid; a link issued later works.
 *
 * The check runs on every upgrade and page load, so it reads Postgres only
 * where a removal can matter. Each node keeps, per lesson, who has a removal
 * row: read once when the lesson is first checked here (first checks of one
 * millisecond share one statement), then kept current by the
 * `participant_removed` notification every removal sends in its own
 * statement, and by the remover's node directly. A person not in the set is
 * not removed: no read. A person in it (rare: a removed person coming back)
 * gets the exact check (their link issued at or before the removal?). The
 * sets are dropped whenever the LISTEN connection (re)connects, as
 * Admission's links are, because a removal may have been missed meanwhile;
 * and a removal heard over the bus first (the lesson's `heardClose`) is
 * checked exactly whatever the set says (`rumoured`).
 */
export class Removals {
  private readonly lessons = new Map<string, Known>();
  private readonly loads: Batcher<string, string[]>;
  private unlisten: (() => Promise<void>) | undefined;
  /** statements run by checks (lesson reads and exact checks; a figure for tests and benchmarks) */
  readsMade = 0;

  private readonly sql: Sql;
  /** the read pool (Deps.readSql) */
  private readonly reads: Sql;

  constructor(deps: Pick<Deps, 'sql' | 'readSql' | 'config'>) {
    this.sql = deps.sql;
    this.reads = deps.readSql;
    this.loads = new Batcher(
      async (lessonIds) => {
        this.readsMade++;
        const rows = await this.reads<{ lesson_id: string; person_id: string }[]>`
          SELECT lesson_id, person_id FROM lesson_removals WHERE lesson_id = ANY(${lessonIds}::text[])`;
        const by = new Map<string, string[]>();
        for (const r of rows) {
          const list = by.get(r.lesson_id);
          if (list) list.push(r.person_id);
          else by.set(r.lesson_id, [r.person_id]);
        }
        return lessonIds.map((id) => by.get(id) ?? []);
      },
      { delayMs: LOAD_BATCH_MS, max: LOAD_BATCH_MAX, concurrency: deps.config.DATABASE_READ_POOL_SIZE },
    );
  }

  /** Hears removals from now on; forgets every lesson's set on each (re)connect of the LISTEN connection. */
  async start(): Promise<void> {
    const req = await this.sql.listen(
      PARTICIPANT_REMOVED_CHANNEL,
      (payload) => {
        try {
          const n = JSON.parse(payload) as { lesson_id?: unknown; person_id?: unknown };
          if (typeof n.lesson_id === 'string' && typeof n.person_id === 'string') this.heard(n.lesson_id, n.person_id);
        } catch {
          // not ours to crash on: a malformed notice is a missed one, and the exact check stays right for the rumoured
        }
      },
      () => this.lessons.clear(),
    );
    this.unlisten = req.unlisten;
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
    this.unlisten = undefined;
    this.lessons.clear();
  }

  /** Records the removal (again: a later removal also refuses links issued in between) and announces it to every node. */
  async remove(lessonId: string, personId: string, by: string, at: Date): Promise<void> {
    await this.sql`
      WITH stored AS (
        INSERT INTO lesson_removals (lesson_id, person_id, removed_at, removed_by)
        VALUES (${lessonId}, ${personId}, ${at}, ${by})
        ON CONFLICT (lesson_id, person_id) DO UPDATE SET removed_at = EXCLUDED.removed_at, removed_by = EXCLUDED.removed_by
        RETURNING lesson_id, person_id)
      SELECT pg_notify(${PARTICIPANT_REMOVED_CHANNEL}, json_build_object('lesson_id', lesson_id, 'person_id', person_id)::text) FROM stored`;
    // this node knows before the sockets close, whatever the notification's timing
    this.heard(lessonId, personId);
  }

  /**
   * Whether the link's person was removed after the link was issued. `rumoured`: a removal of
   * the person was heard over the bus, so the exact check runs whatever this node's set says.
   */
  async isRemoved(link: ResolvedLink, rumoured = false): Promise<boolean> {
    const personId = personIdOf(link);
    if (!rumoured && !(await this.removedIn(link.lesson_id)).has(personId)) return false;
    this.readsMade++;
    const rows = await this.reads`
      SELECT 1 FROM lesson_removals r JOIN links k ON k.id = ${link.link_id}
      WHERE r.lesson_id = ${link.lesson_id} AND r.person_id = ${personId}
        AND k.created_at <= r.removed_at`;
    return rows.length > 0;
  }

  /** The lesson's removed people, read once per lesson (and LISTEN connection). */
  private async removedIn(lessonId: string): Promise<ReadonlySet<string>> {
    let known = this.lessons.get(lessonId);
    if (!known) {
      // in the map before the read: a notification heard while it runs is kept
      const entry: Known = (known = {});
      this.keep(lessonId, entry);
      entry.ready = this.loads.add(lessonId).then(
        (persons) => {
          entry.ready = undefined;
          for (const p of persons) (entry.persons ??= new Set()).add(p);
        },
        (err) => {
          if (this.lessons.get(lessonId) === entry) this.lessons.delete(lessonId);
          throw err;
        },
      );
    }
    if (known.ready) await known.ready;
    return known.persons ?? NOBODY;
  }

  private heard(lessonId: string, personId: string): void {
    const known = this.lessons.get(lessonId);
    if (known) (known.persons ??= new Set()).add(personId);
  }

  private keep(lessonId: string, known: Known): void {
    this.lessons.set(lessonId, known);
    if (this.lessons.size > LESSONS_MAX) this.lessons.delete(this.lessons.keys().next().value!);
  }
}
