import type { Db, Sql, Tx } from '../db/index.js';
import { BoardWork, deletedPageIds, referencedElementIds, type Actor, type BoardHead, type ElementState, type ElementWrite } from './apply.js';
import { BoardOpError, boardError } from './errors.js';
import { DEFAULT_PAGES, SNAPSHOT_FORMAT, SNAPSHOT_VERSION, type BoardElement, type BoardOp, type BoardPage, type Snapshot } from './schema.js';

export interface BatchItem {
  op: BoardOp;
  actor: Actor;
}

/** The outcome of one operation of a batch, in the batch's order. */
export type BatchResult =
  | { ok: true; seq: number; op: BoardOp }
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

  async commitBatch(lessonId: string, items: BatchItem[], at: Date): Promise<BatchResult[]> {
    return this.sql.begin(async (tx) => {
      const head = await lockHead(tx, lessonId);
      if (!head) return items.map(() => ({ ok: false as const, error: boardError('not_found', 'lesson not found') }));
      if (head.archived) return items.map(() => ({ ok: false as const, error: boardError('archived', 'the lesson was deleted') }));
      const ops = items.map((i) => i.op);
      const elements = await loadElementStates(tx, lessonId, referencedElementIds(ops), deletedPageIds(ops));
      const work = new BoardWork(head, elements);
      const results: BatchResult[] = items.map(({ op, actor }) => {
        try {
          const applied = work.apply(op, actor);
          return applied ? { ok: true as const, seq: applied.seq, op: applied.op } : { ok: true as const, seq: null };
        } catch (err) {
          if (err instanceof BoardOpError) return { ok: false as const, error: err };
          throw err;
        }
      });
      if (work.headChanged) {
        await writeElements(tx, lessonId, [...work.writes.values()]);
        const h = work.head;
        await tx`
          UPDATE boards SET seq = ${h.seq}, pages = ${tx.json(h.pages as never)}, pinned_page_id = ${h.pinned_page_id},
            live_elements = ${h.live_elements}, live_bytes = ${h.live_bytes}, first_content_seq = ${h.first_content_seq},
            updated_at = ${at}
          WHERE lesson_id = ${lessonId}`;
      }
      return results;
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

  async head(db: Db, lessonId: string): Promise<(BoardHead & { updated_at: Date }) | undefined> {
    const [row] = await db<(BoardHead & { updated_at: Date })[]>`
      SELECT seq, pages, pinned_page_id, live_elements, live_bytes, first_content_seq, updated_at
      FROM boards WHERE lesson_id = ${lessonId}`;
    return row;
  }
}

/** Our snapshot document (docs/snapshot-format.md) from a full read. */
export function toSnapshot(lessonId: string, read: BoardRead): Snapshot {
  return {
    format: SNAPSHOT_FORMAT,
    version: SNAPSHOT_VERSION,
    lesson_id: lessonId,
    seq: read.head.seq,
    updated_at: read.head.updated_at ? read.head.updated_at.toISOString() : null,
    pinned_page_id: read.head.pinned_page_id,
    pages: read.head.pages,
    elements: read.elements,
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

/** Locks the board row, creating the default board on first use (ON CONFLICT: two nodes may race here). */
async function lockHead(tx: Tx, lessonId: string): Promise<HeadRow | undefined> {
  const select = () => tx<HeadRow[]>`
    SELECT b.seq, b.pages, b.pinned_page_id, b.live_elements, b.live_bytes, b.first_content_seq, b.updated_at,
           (l.archived_at IS NOT NULL) AS archived
    FROM boards b JOIN lessons l ON l.id = b.lesson_id
    WHERE b.lesson_id = ${lessonId} FOR UPDATE OF b`;
  let [head] = await select();
  if (head) return head;
  const inserted = await tx`
    INSERT INTO boards (lesson_id, pages)
    SELECT id, ${tx.json(DEFAULT_PAGES as never)} FROM lessons WHERE id = ${lessonId}
    ON CONFLICT (lesson_id) DO NOTHING RETURNING lesson_id`;
  [head] = await select();
  if (!head && inserted.length === 0) return undefined;
  return head;
}

async function loadElementStates(tx: Tx, lessonId: string, ids: string[], pages: string[]): Promise<Map<string, ElementState>> {
  const map = new Map<string, ElementState>();
  if (!ids.length && !pages.length) return map;
  const rows = await tx<({ element_id: string } & ElementState)[]>`
    SELECT element_id, page_id, deleted, bytes FROM board_elements
    WHERE lesson_id = ${lessonId}
      AND (element_id = ANY(${ids}::text[]) OR (page_id = ANY(${pages}::text[]) AND NOT deleted))`;
  for (const r of rows) map.set(r.element_id, { page_id: r.page_id, deleted: r.deleted, bytes: r.bytes });
  return map;
}

/** Upserts the final state of every element a batch touched, 500 rows per statement. */
async function writeElements(tx: Tx, lessonId: string, writes: ElementWrite[]): Promise<void> {
  for (let i = 0; i < writes.length; i += 500) {
    const chunk = writes.slice(i, i + 500);
    await tx`
      INSERT INTO board_elements (lesson_id, element_id, page_id, z, data, bytes, deleted, updated_seq)
      SELECT ${lessonId}, u.id, u.page_id, u.z, u.data::jsonb, u.bytes::int, u.deleted::boolean, u.seq::bigint
      FROM unnest(${chunk.map((w) => w.id)}::text[], ${chunk.map((w) => w.page_id)}::text[], ${chunk.map((w) => w.z)}::text[],
                  ${chunk.map((w) => (w.data ? JSON.stringify(w.data) : null)) as string[]}::text[],
                  ${chunk.map((w) => String(w.bytes))}::text[], ${chunk.map((w) => String(w.deleted))}::text[],
                  ${chunk.map((w) => String(w.seq))}::text[])
        AS u(id, page_id, z, data, bytes, deleted, seq)
      ON CONFLICT (lesson_id, element_id) DO UPDATE SET
        page_id = EXCLUDED.page_id,
        z = CASE WHEN EXCLUDED.deleted THEN board_elements.z ELSE EXCLUDED.z END,
        data = EXCLUDED.data, bytes = EXCLUDED.bytes, deleted = EXCLUDED.deleted, updated_seq = EXCLUDED.updated_seq`;
  }
}
