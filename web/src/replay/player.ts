import { HistoryBoard, pageOfOp, type HistoryEntry } from '../../../src/board/history.js';
import { DEFAULT_PAGES } from '../../../src/board/schema.js';

/** A history entry as the gateway's replay routes send it (the partner API's format). */
export type ReplayEntry = HistoryEntry & { person: string | null };

/**
 * The replay's clock and pages (docs/board.md, "History and replay"): the timeline runs from the
 * first thing that happened (an arrival, a session's start, an operation) to the last; the board
 * at a moment is the history up to the last operation committed at or before it; the page shown
 * follows the history: the page of the latest operation that names one (an element's page, a page
 * added or pinned), as long as it exists, else the first page.
 */
export class ReplayTimeline {
  readonly start: number;
  readonly end: number;
  private readonly times: number[];
  /** the page shown after each entry */
  private readonly pages: string[];

  constructor(
    readonly entries: readonly ReplayEntry[],
    spans: readonly { from: number; to: number }[],
  ) {
    this.times = entries.map((e) => Date.parse(e.at));
    const all = [...this.times, ...spans.flatMap((s) => [s.from, s.to])];
    this.start = all.length ? Math.min(...all) : 0;
    this.end = all.length ? Math.max(...all) : 0;
    const b = new HistoryBoard();
    let page = DEFAULT_PAGES[0].id;
    this.pages = entries.map((e) => {
      const named = pageOfOp(e.op, b.board);
      b.advance([e]);
      const exists = (id: string | null) => id !== null && b.board.pages.some((p) => p.id === id);
      page = exists(named) ? named! : exists(page) ? page : b.board.pages[0].id;
      return page;
    });
  }

  /** The seq of the board at a moment: the last operation committed at or before it (0: none yet). */
  seqAt(t: number): number {
    let lo = 0;
    let hi = this.times.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.times[mid] <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? 0 : this.entries[lo - 1].seq;
  }

  /** The page shown at a seq. */
  pageAt(seq: number): string {
    // the history holds every seq from 1, in order
    return seq > 0 && this.entries[seq - 1]?.seq === seq ? this.pages[seq - 1] : DEFAULT_PAGES[0].id;
  }
}
