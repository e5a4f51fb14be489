import { LiveBoard, reduce } from './reducer.js';
import { DEFAULT_PAGES, type BoardElement, type BoardOp, type BoardPage } from './schema.js';

/**
 * One committed operation of a board's history (docs/snapshot-format.md, "History"): the
 * operation as the server applied it, its place in the order, when, and by whom.
 */
export interface HistoryEntry {
  seq: number;
  /** ISO 8601, the commit's time */
  at: string;
  /** the author's public id in the lesson (as in attendance), null for a write without a person */
  person_id: string | null;
  role: string;
  op: BoardOp;
}

/** The board as it was after some operation: what a snapshot holds, without its files. */
export interface BoardAt {
  seq: number;
  pages: BoardPage[];
  pinned_page_id: string | null;
  /** per page in the board's order, stacking order within a page (z bytewise, then id) */
  elements: BoardElement[];
}

/**
 * A board rebuilt from its history, forward: the same reducer every replica runs
 * (src/board/reducer.ts), fed the operations in seq order. Applying the history up to a seq gives
 * the board as it was then; up to the last, the snapshot (the history test checks it). No node
 * imports: the replay page bundles this file.
 */
export class HistoryBoard {
  readonly board = new LiveBoard(DEFAULT_PAGES.map((p) => ({ ...p })));
  seq = 0;

  /** Applies the entries after the current seq, in order, up to `until` (inclusive; all when absent). */
  advance(entries: readonly Pick<HistoryEntry, 'seq' | 'op'>[], until = Infinity): void {
    for (const e of entries) {
      if (e.seq <= this.seq) continue;
      if (e.seq > until) break;
      reduce(this.board, e.op);
      this.seq = e.seq;
    }
  }

  state(): BoardAt {
    const rank = new Map(this.board.pages.map((p, i) => [p.id, i]));
    const elements = [...this.board.elements.values()].sort(
      (a, b) => (rank.get(a.page_id) ?? 1e9) - (rank.get(b.page_id) ?? 1e9) || cmp(a.z, b.z) || cmp(a.id, b.id),
    );
    return { seq: this.seq, pages: this.board.pages, pinned_page_id: this.board.pinned_page_id, elements };
  }
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The board after the entries up to `until` (all of them when absent). */
export function boardAt(entries: readonly Pick<HistoryEntry, 'seq' | 'op'>[], until = Infinity): BoardAt {
  const b = new HistoryBoard();
  b.advance(entries, until);
  return b.state();
}

/**
 * The page an operation happened on, if it names one: where the replay looks when it follows the
 * history (an element's page, an added page, a pinned page). Deletes name no page here: the
 * replayed board no longer has the element.
 */
export function pageOfOp(op: BoardOp, board: LiveBoard): string | null {
  switch (op.type) {
    case 'element.add':
    case 'element.update':
      return op.elements[0].page_id;
    case 'element.delete':
      return board.elements.get(op.elements[0].id)?.page_id ?? null;
    case 'page.add':
      return op.page.id;
    case 'page.pin':
      return op.page_id;
    default:
      return null;
  }
}
