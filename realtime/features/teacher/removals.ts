import { PARTICIPANT_REMOVED_CHANNEL } from '../../../src/db/channels.js';
import type { Sql } from '../../../src/db/index.js';
import { ListenedSet, type Listened } from '../../../src/db/listenedSet.js';
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
 * remover's node directly (a ListenedSet, src/db/listenedSet.ts). So a lesson's first arrival on a node waits for no
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
  /** who has a removal that can still refuse a link, by lesson and person */
  private readonly removed: ListenedSet<Removal>;
  /** statements run by checks and set reads (a figure for tests and benchmarks) */
  readsMade = 0;

  private readonly sql: Sql;
  /** the read pool (Deps.readSql) */
  private readonly reads: Sql;
  private readonly clock: Deps['clock'];

  constructor(deps: Pick<Deps, 'sql' | 'readSql' | 'clock' | 'log'>) {
    this.sql = deps.sql;
    this.reads = deps.readSql;
    this.clock = deps.clock;
    this.removed = new ListenedSet(deps, {
      channel: PARTICIPANT_REMOVED_CHANNEL,
      parse: (payload, now) => {
        const n = JSON.parse(payload) as { lesson_id?: unknown; person_id?: unknown };
        return typeof n.lesson_id === 'string' && typeof n.person_id === 'string' ? removal(n.lesson_id, n.person_id, now) : undefined;
      },
      read: async (now) => {
        this.readsMade++;
        const since = new Date(now.getTime() - RELEVANT_MS - RELEVANT_MARGIN_MS);
        const rows = await this.reads<{ lesson_id: string; person_id: string; removed_at: Date }[]>`
          SELECT lesson_id, person_id, removed_at FROM lesson_removals WHERE removed_at > ${since}`;
        return rows.map((r) => removal(r.lesson_id, r.person_id, r.removed_at.getTime()));
      },
    });
  }

  /**
   * Hears removals from now on; reads the set again on each (re)connect of the LISTEN connection.
   * `onHeard` gets every removal heard from Postgres: each notification, and each removal in a set
   * read again after a reconnect (one may have been missed while the connection was down).
   */
  async start(onHeard?: (lessonId: string, personId: string) => void): Promise<void> {
    // the first check waits for the first read (known()); a failed one is tried again by the next check
    await this.removed.start(onHeard && ((r) => onHeard(r.lessonId, r.personId)));
  }

  async stop(): Promise<void> {
    await this.removed.stop();
  }

  /** Records the removal (again: a later removal also refuses links issued in between) and announces it to every node. */
  async remove(lessonId: string, personId: string, by: string, at: Date): Promise<void> {
    await recordRemoval(this.sql, lessonId, personId, by, at);
    // this node knows before the sockets close, whatever the notification's timing
    this.removed.add(removal(lessonId, personId, this.clock.now().getTime()));
  }

  /**
   * Whether the link's person was removed after the link was issued. `rumoured`: a removal of
   * the person was heard over the bus, so the exact check runs whatever this node's set says.
   */
  async isRemoved(link: ResolvedLink, rumoured = false): Promise<boolean> {
    const personId = personIdOf(link);
    if (!rumoured) {
      // the set once read (read again if the last read failed: the check fails meanwhile, as a read would)
      await this.removed.known();
      if (!this.removed.has(removalKey(link.lesson_id, personId))) return false;
    }
    this.readsMade++;
    const rows = await this.reads`
      SELECT 1 FROM lesson_removals r JOIN links k ON k.id = ${link.link_id}
      WHERE r.lesson_id = ${link.lesson_id} AND r.person_id = ${personId}
        AND k.created_at <= r.removed_at`;
    return rows.length > 0;
  }
}

interface Removal extends Listened {
  lessonId: string;
  personId: string;
}

function removalKey(lessonId: string, personId: string): string {
  return `${lessonId}/${personId}`;
}

/** A removal made (or learnt of) at `at` (ms): it can refuse a link for RELEVANT_MS after. */
function removal(lessonId: string, personId: string, at: number): Removal {
  return { key: removalKey(lessonId, personId), until: at + RELEVANT_MS + RELEVANT_MARGIN_MS, lessonId, personId };
}
