import { MAX_VERSION, type BoardElement, type BoardOp, type BoardPage, type Tombstone } from './schema.js';

/**
 * The board's one reducer, shared by the server (src/board/apply.ts, which
 * first checks who may do what and the limits) and the participant page
 * (web/src/board/sync.ts, which applies what the server committed). It states
 * the rules every replica of a board must agree on (docs/board.md, "Sync
 * model"):
 *
 * - element versioning: a write wins when it is newer (higher `version`, the
 *   lower `version_nonce` on a tie), as Excalidraw's reconcileElements;
 * - deletes are tombstones carrying the delete's version: only a later version
 *   revives the element (undo of a delete);
 * - page operations (add after a page, rename, delete with its elements,
 *   reorder, pin);
 * - skipped writes: the ids of an operation's writes that lost, found in the
 *   same pass that keeps the winners.
 *
 * No node imports: the page bundles this file.
 */

/** The version stamp of an element write, live or tombstone. */
export interface Versioned {
  version: number;
  version_nonce: number;
}

/**
 * Does write `a` win over the stored state `b`? The higher version wins; on a
 * tie the lower nonce, as in Excalidraw's reconcileElements
 * (shouldDiscardRemoteElement), so every replica picks the same one. Nothing
 * stored: `a` wins.
 */
export const isNewer = (a: Versioned, b: Versioned | undefined): boolean =>
  !b || a.version > b.version || (a.version === b.version && a.version_nonce < b.version_nonce);

/** What a replica knows of an element: its stamp, its page, and whether it is a tombstone. */
export interface ElementStamp extends Versioned {
  page_id: string;
  deleted?: boolean;
}

/**
 * One replica of a board, as the reducer sees it. The server's holds stamps
 * and byte counts (BoardWork); the page's holds the live elements themselves.
 */
export interface BoardReplica {
  pages: BoardPage[];
  pinned_page_id: string | null;
  /** the stamp of an element this replica knows (live or tombstone), undefined when unknown */
  stamp(id: string): ElementStamp | undefined;
  /** the live elements of a page (deleting the page tombstones them) */
  livePage(pageId: string): Iterable<[string, Versioned]>;
  /** the element becomes live with this content (new, changed or revived) */
  put(el: BoardElement): void;
  /** the element becomes a tombstone with this stamp */
  remove(id: string, v: Versioned): void;
}

/** An operation as a replica applied it: without the element writes that lost, and their ids. */
export interface Applied {
  op: BoardOp;
  skipped: string[];
}

/**
 * The writes of an element operation that win against the replica, and the
 * ids of those that lose, in one pass. A delete of an element the replica
 * never had loses too (nothing to delete); an add or update of one wins.
 */
export function partition(op: BoardOp, stamp: (id: string) => ElementStamp | undefined): Applied | null {
  if (op.type === 'element.add' || op.type === 'element.update') {
    const kept: BoardElement[] = [];
    const skipped: string[] = [];
    for (const el of op.elements) (isNewer(el, stamp(el.id)) ? kept.push(el) : skipped.push(el.id));
    return kept.length ? { op: { ...op, elements: kept }, skipped } : null;
  }
  if (op.type === 'element.delete') {
    const kept: Tombstone[] = [];
    const skipped: string[] = [];
    for (const t of op.elements) {
      const cur = stamp(t.id);
      // a newer delete of a tombstone raises its version, so the order of two
      // deletes and a revival between them never decides the outcome
      (cur && isNewer(t, cur) ? kept.push(t) : skipped.push(t.id));
    }
    return kept.length ? { op: { ...op, elements: kept }, skipped } : null;
  }
  return { op, skipped: [] };
}

/**
 * The sender's operation as the server applied it (`board.ack`): without the writes it skipped,
 * and with the stamps it gave the teacher's writes it restamped.
 */
export function withoutSkipped(op: BoardOp, skipped: readonly string[], restamped: readonly Tombstone[] = []): BoardOp {
  if (!skipped.length && !restamped.length) return op;
  if (op.type !== 'element.add' && op.type !== 'element.update' && op.type !== 'element.delete') return op;
  const lost = new Set(skipped);
  const stamps = new Map(restamped.map((t) => [t.id, t]));
  const stamp = <T extends Versioned & { id: string }>(w: T): T => {
    const t = stamps.get(w.id);
    return t ? { ...w, version: t.version, version_nonce: t.version_nonce } : w;
  };
  return { ...op, elements: (op.elements as (Versioned & { id: string })[]).filter((e) => !lost.has(e.id)).map(stamp) } as BoardOp;
}

/**
 * Applies an operation the rules accepted to a replica. Returns it as applied
 * (and the ids of the writes that lost), or null when nothing was left.
 * Applying the same committed operations in sequence order leaves every
 * replica with the same board.
 */
export function reduce(r: BoardReplica, op: BoardOp): Applied | null {
  switch (op.type) {
    case 'element.add':
    case 'element.update': {
      const applied = partition(op, (id) => r.stamp(id));
      if (applied?.op.type === op.type) for (const el of applied.op.elements) r.put(el);
      return applied;
    }
    case 'element.delete': {
      const applied = partition(op, (id) => r.stamp(id));
      if (applied?.op.type === 'element.delete') for (const t of applied.op.elements) r.remove(t.id, t);
      return applied;
    }
    case 'page.add': {
      const at = op.after_page_id ? r.pages.findIndex((p) => p.id === op.after_page_id) + 1 : r.pages.length;
      // two people pressing "+" at once both name their page after the same board: the later one in
      // the order takes the next free number, the same on every replica (they reduce the same pages)
      const page = r.pages.some((p) => p.name === op.page.name) && DEFAULT_NAME.test(op.page.name) ? { ...op.page, name: nextPageName(r.pages) } : op.page;
      r.pages = [...r.pages.slice(0, at), page, ...r.pages.slice(at)];
      return { op: page === op.page ? op : { ...op, page }, skipped: [] };
    }
    case 'page.rename':
      r.pages = r.pages.map((p) => (p.id === op.page_id ? { ...p, name: op.name } : p));
      break;
    case 'page.delete': {
      r.pages = r.pages.filter((p) => p.id !== op.page_id);
      if (r.pinned_page_id === op.page_id) r.pinned_page_id = null;
      // the page's elements get tombstones one version above what they had, so a stale
      // write of one of them cannot bring it back, while its owner's next edit still can; never past
      // the column's range (an element at the top keeps its version: the page is gone either way)
      for (const [id, v] of [...r.livePage(op.page_id)]) r.remove(id, { version: Math.min(v.version + 1, MAX_VERSION), version_nonce: v.version_nonce });
      break;
    }
    case 'page.reorder': {
      const byId = new Map(r.pages.map((p) => [p.id, p]));
      r.pages = op.page_ids.flatMap((id) => byId.get(id) ?? []);
      break;
    }
    case 'page.pin':
      r.pinned_page_id = op.page_id;
      break;
  }
  return { op, skipped: [] };
}

const DEFAULT_NAME = /^Page (\d+)$/;

/**
 * The default name of a new page: "Page N", N one above the highest number an existing
 * "Page N" has, so no tab repeats a name (not the count of pages: after "Page 2" is deleted,
 * a third page would be a second "Page 3").
 */
export function nextPageName(pages: readonly BoardPage[]): string {
  let top = 0;
  for (const p of pages) top = Math.max(top, Number(DEFAULT_NAME.exec(p.name)?.[1] ?? 0));
  return `Page ${top + 1}`;
}

/** Ids of the elements one operation names. */
export function elementIdsOf(op: BoardOp): string[] {
  return op.type === 'element.add' || op.type === 'element.update' || op.type === 'element.delete' ? op.elements.map((e) => e.id) : [];
}

/**
 * The page's replica: the live elements themselves, by id. It keeps no
 * tombstones (the server's resync names deleted ids without their versions),
 * which is why the page drops the writes the server skipped before reducing
 * its own operation (withoutSkipped).
 */
export class LiveBoard implements BoardReplica {
  readonly elements = new Map<string, BoardElement>();

  constructor(
    public pages: BoardPage[],
    public pinned_page_id: string | null = null,
  ) {}

  stamp(id: string): ElementStamp | undefined {
    return this.elements.get(id);
  }

  *livePage(pageId: string): Iterable<[string, Versioned]> {
    for (const [id, el] of this.elements) if (el.page_id === pageId) yield [id, el];
  }

  put(el: BoardElement): void {
    this.elements.set(el.id, el);
  }

  remove(id: string): void {
    this.elements.delete(id);
  }
}
