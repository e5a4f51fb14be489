import type { Db, Sql, Tx } from '../db/index.js';
import { BoardWork, deletedPageIds, referencedElementIds, type Actor, type BoardHead, type ElementState, type ElementWrite } from './apply.js';
import { BoardOpError, boardError } from './errors.js';
import type { HistoryEntry } from './history.js';
import { DEFAULT_PAGES, SNAPSHOT_FORMAT, SNAPSHOT_VERSION, type BoardElement, type BoardOp, type BoardPage, type FileInfo, type Snapshot, type Tombstone } from './schema.js';

export interface BatchItem {
  op: BoardOp;
  actor: Actor;
}

/** The outcome of one operation of a batch, in the batch's order. */
export type BatchResult =
  | { ok: true; seq: number; op: BoardOp; skipped?: string[]; restamped?: Tombstone[] }
  | { ok: true; seq: null } // nothing left to apply (e.g. an update of elements deleted meanwhile)
  | { ok: false; error: BoardOpError };

interface HeadRow extends BoardHead {
  archived: boolean;
  updated_at: Date;
}

/** A consistent read of the board: the head and its live elements (or the changes since a seq). */
export interface BoardRead {
  head: BoardHead & { updated_at: Date | null };
  elements: BoardElement[];
  deleted_ids: string[];
  /** false when `elements` holds only what changed after `since` */
  full: boolean;
}

const EMPTY_HEAD = (): BoardHead & { updated_at: null } => ({
  seq: 0,
  pages: DEFAULT_PAGES.map((p) => ({ ...p })),
  pinned_page_id: null,
  live_elements: 0,
  live_bytes: 0,
  first_content_seq: null,
  updated_at: null,
});

/**
 * Postgres persistence of boards (migrations/005_board.sql). A batch is one
 * transaction holding the board row lock: the sequence is assigned in commit
 * order across every gateway node, and a result is returned only after the
 * commit, so an acknowledged operation is durable.
 */
export class BoardStore {
  constructor(private readonly sql: Sql) {}

  /** One lesson's batch in its own transaction (tests; the gateway goes through commitLessons). */
  async commitBatch(lessonId: string, items: BatchItem[], at: Date): Promise<BatchResult[]> {
    return (await this.commitLessons([{ lessonId, items }], at)).get(lessonId)!;
  }

  /**
   * The batches of several lessons in ONE transaction (a node's group commit
   * across lessons: docs/board.md, "Ordering and durability"): the board rows
   * are locked in lesson id order (two nodes never deadlock on them), every
   * batch is applied by its own BoardWork in order, and all writes go in a
   * few set-based statements, so a transaction costs about the same for one
   * lesson as for fifty. Results per lesson, in each batch's order.
   */
  async commitLessons(batches: { lessonId: string; items: BatchItem[] }[], at: Date): Promise<Map<string, BatchResult[]>> {
    return this.sql.begin(async (tx) => {
      const heads = await lockHeads(tx, batches.map((b) => b.lessonId));
      const wanted: { lessons: string[]; ids: string[]; pageLessons: string[]; pages: string[] } = { lessons: [], ids: [], pageLessons: [], pages: [] };
      for (const b of batches) {
        if (!heads.has(b.lessonId)) continue;
        const ops = b.items.map((i) => i.op);
        for (const id of referencedElementIds(ops)) {
          wanted.lessons.push(b.lessonId);
          wanted.ids.push(id);
        }
        for (const page of deletedPageIds(ops)) {
          wanted.pageLessons.push(b.lessonId);
          wanted.pages.push(page);
        }
      }
      const states = await loadElementStates(tx, wanted);
      const out = new Map<string, BatchResult[]>();
      const writes: (ElementWrite & { lesson_id: string })[] = [];
      const changed: { lessonId: string; head: BoardHead }[] = [];
      const history: HistoryRow[] = [];
      for (const b of batches) {
        const head = heads.get(b.lessonId);
        if (!head || head.archived) {
          const error = head ? boardError('archived', 'the lesson was deleted') : boardError('not_found', 'lesson not found');
          out.set(b.lessonId, b.items.map(() => ({ ok: false as const, error })));
          continue;
        }
        const work = new BoardWork(head, states.get(b.lessonId) ?? new Map());
        out.set(
          b.lessonId,
          b.items.map(({ op, actor }): BatchResult => {
            try {
              const applied = work.apply(op, actor);
              if (applied) history.push({ lesson_id: b.lessonId, seq: applied.seq, person_id: actor.person_id ?? null, role: actor.role, op: applied.op });
              return applied ? { ok: true, ...applied } : { ok: true, seq: null };
            } catch (err) {
              if (err instanceof BoardOpError) return { ok: false, error: err };
              throw err;
            }
          }),
        );
        if (work.headChanged) {
          for (const w of work.writes.values()) writes.push({ ...w, lesson_id: b.lessonId });
          changed.push({ lessonId: b.lessonId, head: work.head });
        }
      }
      await writeElements(tx, writes);
      await writeHeads(tx, changed, at);
      await appendHistory(tx, history, at);
      return out;
    });
  }

  /**
   * The board as one consistent read (REPEATABLE READ): the head and either
   * every live element, or, with `since`, only what changed after that seq
   * (a reconnecting client's resync). A lesson that never had a board reads
   * as the empty default board at seq 0; reading never creates anything.
   */
  async read(lessonId: string, since?: number): Promise<BoardRead> {
    return this.sql.begin('isolation level repeatable read read only', async (tx) => {
      const [row] = await tx<(BoardHead & { updated_at: Date })[]>`
        SELECT seq, pages, pinned_page_id, live_elements, live_bytes, first_content_seq, updated_at
        FROM boards WHERE lesson_id = ${lessonId}`;
      const head = row ?? EMPTY_HEAD();
      const full = since === undefined || since <= 0 || since > head.seq;
      if (!row) return { head, elements: [], deleted_ids: [], full: true };
      if (full) {
        const rows = await tx<{ data: BoardElement }[]>`
          SELECT data FROM board_elements WHERE lesson_id = ${lessonId} AND NOT deleted ORDER BY page_id, z, element_id`;
        return { head, elements: orderByPages(head.pages, rows.map((r) => r.data)), deleted_ids: [], full };
      }
      const rows = await tx<{ element_id: string; data: BoardElement | null; deleted: boolean }[]>`
        SELECT element_id, data, deleted FROM board_elements
        WHERE lesson_id = ${lessonId} AND updated_seq > ${since}
        ORDER BY page_id, z, element_id`;
      return {
        head,
        elements: orderByPages(head.pages, rows.filter((r) => !r.deleted).map((r) => r.data!)),
        deleted_ids: rows.filter((r) => r.deleted).map((r) => r.element_id),
        full,
      };
    });
  }

  /** The live elements of one page in stacking order (the preview renders these). */
  async pageElements(db: Db, lessonId: string, pageId: string): Promise<BoardElement[]> {
    const rows = await db<{ data: BoardElement }[]>`
      SELECT data FROM board_elements WHERE lesson_id = ${lessonId} AND page_id = ${pageId} AND NOT deleted
      ORDER BY z, element_id`;
    return rows.map((r) => r.data);
  }

  /** Each lesson's board seq (0 for a board never written), in one statement: the gateway's feeds start at it. */
  async seqs(db: Db, lessonIds: string[]): Promise<number[]> {
    const rows = await db<{ lesson_id: string; seq: number }[]>`SELECT lesson_id, seq FROM boards WHERE lesson_id = ANY(${lessonIds}::text[])`;
    const by = new Map(rows.map((r) => [r.lesson_id, r.seq]));
    return lessonIds.map((id) => by.get(id) ?? 0);
  }

  /**
   * The head and the state of some elements of one lesson, enough to check an operation naming only
   * them (BoardWork.admit), without a transaction: a stroke's start is checked this way. Undefined
   * for a lesson that does not exist or was deleted.
   */
  async admission(db: Db, lessonId: string, ids: string[]): Promise<{ head: BoardHead; elements: Map<string, ElementState> } | undefined> {
    const [lesson] = await db<{ archived: boolean }[]>`SELECT archived_at IS NOT NULL AS archived FROM lessons WHERE id = ${lessonId}`;
    if (!lesson || lesson.archived) return undefined;
    const head = (await this.head(db, lessonId)) ?? EMPTY_HEAD();
    const rows = await db<({ element_id: string } & ElementState)[]>`
      SELECT element_id, page_id, deleted, bytes, version, version_nonce, coalesce((data->>'locked')::boolean, false) AS locked
      FROM board_elements WHERE lesson_id = ${lessonId} AND element_id = ANY(${ids}::text[])`;
    return { head, elements: new Map(rows.map(({ element_id, ...st }) => [element_id, st])) };
  }

  async head(db: Db, lessonId: string): Promise<(BoardHead & { updated_at: Date }) | undefined> {
    const [row] = await db<(BoardHead & { updated_at: Date })[]>`
      SELECT seq, pages, pinned_page_id, live_elements, live_bytes, first_content_seq, updated_at
      FROM boards WHERE lesson_id = ${lessonId}`;
    return row;
  }
}

/** The history's entries after `afterSeq`, oldest first, at most `limit` of them (docs/snapshot-format.md, "History"). */
export async function boardHistory(db: Db, lessonId: string, afterSeq: number, limit: number): Promise<HistoryEntry[]> {
  const rows = await db<{ seq: string; at: Date; person_id: string | null; role: string; op: BoardOp }[]>`
    SELECT seq, at, person_id, role, op FROM board_history
    WHERE lesson_id = ${lessonId} AND seq > ${afterSeq} ORDER BY seq LIMIT ${limit}`;
  return rows.map((r) => ({ seq: Number(r.seq), at: r.at.toISOString(), person_id: r.person_id, role: r.role, op: r.op }));
}

/** Our snapshot document (docs/snapshot-format.md) from a full read. */
export function toSnapshot(lessonId: string, read: BoardRead, files: FileInfo[] = []): Snapshot {
  return {
    format: SNAPSHOT_FORMAT,
    version: SNAPSHOT_VERSION,
    lesson_id: lessonId,
    seq: read.head.seq,
    updated_at: read.head.updated_at ? read.head.updated_at.toISOString() : null,
    pinned_page_id: read.head.pinned_page_id,
    pages: read.head.pages,
    elements: read.elements,
    files,
  };
}

/** Elements grouped by the board's page order, stacking order within a page. */
function orderByPages(pages: BoardPage[], elements: BoardElement[]): BoardElement[] {
  const rank = new Map(pages.map((p, i) => [p.id, i]));
  return elements
    .map((e, i) => ({ e, i }))
    .sort((a, b) => (rank.get(a.e.page_id) ?? 1e9) - (rank.get(b.e.page_id) ?? 1e9) || a.i - b.i)
    .map((x) => x.e);
}

/**
 * Locks the board rows of these lessons in lesson id order, creating the
 * default board of a lesson on first use (ON CONFLICT: two nodes may race
 * there). Lessons that do not exist are missing from the map.
 */
async function lockHeads(tx: Tx, lessonIds: string[]): Promise<Map<string, HeadRow & { lesson_id: string }>> {
  const select = (ids: string[]) => tx<(HeadRow & { lesson_id: string })[]>`
    SELECT b.lesson_id, b.seq, b.pages, b.pinned_page_id, b.live_elements, b.live_bytes, b.first_content_seq, b.updated_at,
           (l.archived_at IS NOT NULL) AS archived
    FROM boards b JOIN lessons l ON l.id = b.lesson_id
    WHERE b.lesson_id = ANY(${ids}::text[]) ORDER BY b.lesson_id FOR UPDATE OF b`;
  const heads = new Map((await select(lessonIds)).map((h) => [h.lesson_id, h]));
  const missing = lessonIds.filter((id) => !heads.has(id));
  if (missing.length) {
    await tx`
      INSERT INTO boards (lesson_id, pages)
      SELECT id, ${tx.json(DEFAULT_PAGES as never)} FROM lessons WHERE id = ANY(${missing}::text[]) ORDER BY id
      ON CONFLICT (lesson_id) DO NOTHING`;
    for (const h of await select(missing)) heads.set(h.lesson_id, h);
  }
  return heads;
}

/**
 * The state of every element the batches name, and of every live element on
 * pages they delete, by lesson: one statement for all lessons.
 */
async function loadElementStates(
  tx: Tx,
  w: { lessons: string[]; ids: string[]; pageLessons: string[]; pages: string[] },
): Promise<Map<string, Map<string, ElementState>>> {
  const out = new Map<string, Map<string, ElementState>>();
  if (!w.ids.length && !w.pages.length) return out;
  const rows = await tx<({ lesson_id: string; element_id: string } & ElementState)[]>`
    SELECT e.lesson_id, e.element_id, e.page_id, e.deleted, e.bytes, e.version, e.version_nonce, coalesce((e.data->>'locked')::boolean, false) AS locked FROM board_elements e
    JOIN unnest(${w.lessons}::text[], ${w.ids}::text[]) AS u(lesson_id, element_id) ON e.lesson_id = u.lesson_id AND e.element_id = u.element_id
    UNION ALL
    SELECT e.lesson_id, e.element_id, e.page_id, e.deleted, e.bytes, e.version, e.version_nonce, coalesce((e.data->>'locked')::boolean, false) AS locked FROM board_elements e
    JOIN unnest(${w.pageLessons}::text[], ${w.pages}::text[]) AS p(lesson_id, page_id) ON e.lesson_id = p.lesson_id AND e.page_id = p.page_id
    WHERE NOT e.deleted`;
  for (const r of rows) {
    let m = out.get(r.lesson_id);
    if (!m) out.set(r.lesson_id, (m = new Map()));
    m.set(r.element_id, { page_id: r.page_id, deleted: r.deleted, bytes: r.bytes, version: r.version, version_nonce: r.version_nonce, locked: r.locked });
  }
  return out;
}

/** Upserts the final state of every element the batches touched, 500 rows per statement. */
async function writeElements(tx: Tx, writes: (ElementWrite & { lesson_id: string })[]): Promise<void> {
  for (let i = 0; i < writes.length; i += 500) {
    const chunk = writes.slice(i, i + 500);
    await tx`
      INSERT INTO board_elements (lesson_id, element_id, page_id, z, data, bytes, deleted, updated_seq, version, version_nonce)
      SELECT u.lesson_id, u.id, u.page_id, u.z, u.data::jsonb, u.bytes::int, u.deleted::boolean, u.seq::bigint, u.version::int, u.nonce::int
      FROM unnest(${chunk.map((w) => w.lesson_id)}::text[], ${chunk.map((w) => w.id)}::text[], ${chunk.map((w) => w.page_id)}::text[], ${chunk.map((w) => w.z)}::text[],
                  ${chunk.map((w) => w.json) as string[]}::text[],
                  ${chunk.map((w) => String(w.bytes))}::text[], ${chunk.map((w) => String(w.deleted))}::text[],
                  ${chunk.map((w) => String(w.seq))}::text[], ${chunk.map((w) => String(w.version))}::text[], ${chunk.map((w) => String(w.version_nonce))}::text[])
        AS u(lesson_id, id, page_id, z, data, bytes, deleted, seq, version, nonce)
      ON CONFLICT (lesson_id, element_id) DO UPDATE SET
        page_id = EXCLUDED.page_id,
        z = CASE WHEN EXCLUDED.deleted THEN board_elements.z ELSE EXCLUDED.z END,
        data = EXCLUDED.data, bytes = EXCLUDED.bytes, deleted = EXCLUDED.deleted, updated_seq = EXCLUDED.updated_seq,
        version = EXCLUDED.version, version_nonce = EXCLUDED.version_nonce`;
  }
}

interface HistoryRow {
  lesson_id: string;
  seq: number;
  person_id: string | null;
  role: string;
  op: BoardOp;
}

/**
 * Appends the committed operations to the board's history (migrations/016_board_history.sql), in
 * the commit's own transaction: an operation is in the history exactly when it is on the board.
 * 500 rows per statement.
 */
async function appendHistory(tx: Tx, rows: HistoryRow[], at: Date): Promise<void> {
  for (let i = 0; i < rows.length; i += 500) {
    const chunk = rows.slice(i, i + 500);
    await tx`
      INSERT INTO board_history (lesson_id, seq, at, person_id, role, op)
      SELECT u.lesson_id, u.seq::bigint, ${at}, u.person_id, u.role, u.op::jsonb
      FROM unnest(${chunk.map((r) => r.lesson_id)}::text[], ${chunk.map((r) => String(r.seq))}::text[], ${chunk.map((r) => r.person_id) as string[]}::text[],
                  ${chunk.map((r) => r.role)}::text[], ${chunk.map((r) => JSON.stringify(r.op))}::text[])
        AS u(lesson_id, seq, person_id, role, op)`;
  }
}

/** The new heads (seq, pages, pin, counters) of the lessons a transaction changed, in one statement. */
async function writeHeads(tx: Tx, changed: { lessonId: string; head: BoardHead }[], at: Date): Promise<void> {
  if (!changed.length) return;
  const col = <T>(f: (h: BoardHead) => T) => changed.map((c) => f(c.head));
  await tx`
    UPDATE boards b SET seq = u.seq::bigint, pages = u.pages::jsonb, pinned_page_id = u.pinned, live_elements = u.live::int,
      live_bytes = u.bytes::bigint, first_content_seq = u.first::bigint, updated_at = ${at}
    FROM unnest(${changed.map((c) => c.lessonId)}::text[], ${col((h) => String(h.seq))}::text[], ${col((h) => JSON.stringify(h.pages))}::text[],
                ${col((h) => h.pinned_page_id) as string[]}::text[], ${col((h) => String(h.live_elements))}::text[],
                ${col((h) => String(h.live_bytes))}::text[], ${col((h) => (h.first_content_seq === null ? null : String(h.first_content_seq))) as string[]}::text[])
      AS u(lesson_id, seq, pages, pinned, live, bytes, first)
    WHERE b.lesson_id = u.lesson_id`;
}
