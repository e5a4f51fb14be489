import type { BoardElement, BoardOp, BoardPage } from '../../../src/board/schema.js';
import type { ServerMessage } from '../../../src/board/protocol.js';
import { fromExcalidraw, toExcalidraw, type ExEl } from './convert.js';
import { byteLength, fitElement, FRAME_OVERHEAD } from './fit.js';

type StateMsg = Extract<ServerMessage, { type: 'board.state' }>;
type OpsMsg = Extract<ServerMessage, { type: 'board.ops' }>;

export interface SyncView {
  pages: BoardPage[];
  pinned: string | null;
  page: string;
  seq: number;
}

/** What the sync needs from the editor and the connection (Board.tsx provides them). */
export interface SyncHost {
  /** every element in the editor's scene, deleted ones included */
  scene(): readonly ExEl[];
  /** replaces the scene without entering the local undo history */
  setScene(elements: Partial<ExEl>[]): void;
  send(msg: { type: 'board.op'; ref: string; op: BoardOp } | { type: 'board.sync'; since: number }): boolean;
  changed(view: SyncView): void;
  notify(text: string): void;
  roughness: number;
  role: 'teacher' | 'student';
  /** largest frame the gateway accepts (a bigger one closes the socket with 4413) */
  maxFrameBytes: number;
}

const CHUNK = 100;
let refCounter = 0;
const nextRef = () => `r${Date.now().toString(36)}${(refCounter++).toString(36)}`;
const same = (a: BoardElement | undefined, b: BoardElement) => !!a && JSON.stringify(a) === JSON.stringify(b);

/**
 * Keeps the editor and the server's board in step (docs/board-protocol.md, "Client rules").
 *
 * `confirmed` is the board as the server ordered it, up to `seq`. The editor's
 * scene is that plus my not yet acknowledged changes. Local edits are diffed
 * against what was last synced (by Excalidraw's element version) and sent as
 * operations; operations of others are applied in seq order, and a gap asks
 * for a resync. After a reconnect the scene is diffed against the server's
 * state again, so strokes drawn while offline are sent, not lost.
 */
export class BoardSync {
  private confirmed = new Map<string, BoardElement>();
  /** Excalidraw version of each element as last sent or applied: equal means nothing to send */
  private known = new Map<string, number>();
  private pending = new Map<string, BoardOp>();
  private pendingIds = new Map<string, number>();
  private seq = 0;
  private pages: BoardPage[] = [{ id: 'page-1', name: 'Page 1' }];
  private pinned: string | null = null;
  private page = 'page-1';
  private syncing = false;
  private online = false;
  /** ids sent but not acknowledged when the connection dropped: the server may or may not have them */
  private unsure = new Set<string>();

  constructor(private readonly host: SyncHost) {}

  view(): SyncView {
    return { pages: this.pages, pinned: this.pinned, page: this.page, seq: this.seq };
  }

  // ---- connection ----

  /** (Re)connected: ask for what changed since the last seq we know. */
  connected(): void {
    this.online = true;
    this.syncing = false;
    this.requestSync();
  }

  disconnected(): void {
    this.online = false;
    this.syncing = false;
    for (const id of this.pendingIds.keys()) this.unsure.add(id);
    this.pending.clear();
    this.pendingIds.clear();
  }

  private requestSync(): void {
    if (this.syncing) return;
    this.syncing = this.host.send({ type: 'board.sync', since: this.seq });
  }

  // ---- server messages ----

  onState(msg: StateMsg): void {
    this.syncing = false;
    if (msg.full) this.confirmed.clear();
    for (const id of msg.deleted_ids) this.confirmed.delete(id);
    for (const el of msg.elements) this.confirmed.set(el.id, el);
    this.seq = msg.seq;
    this.pages = msg.pages;
    this.pinned = msg.pinned_page_id;
    if (!this.pages.some((p) => p.id === this.page)) this.page = this.pages[0].id;
    this.followPin();
    this.reconcile();
    this.host.changed(this.view());
  }

  onOps(msg: OpsMsg): void {
    for (const { seq, op } of msg.ops) {
      if (seq <= this.seq) continue;
      if (seq !== this.seq + 1) return this.requestSync(); // a gap: the state answer covers the rest
      this.seq = seq;
      this.applyConfirmed(op as BoardOp);
    }
    this.followPin();
    this.renderPage();
    this.host.changed(this.view());
  }

  onAck(ref: string, seq: number | null): void {
    const op = this.pending.get(ref);
    this.pending.delete(ref);
    if (op) this.release(op);
    if (seq === null || seq <= this.seq) return;
    if (seq !== this.seq + 1) return this.requestSync();
    this.seq = seq;
    if (op) this.applyConfirmed(op);
    this.host.changed(this.view());
  }

  onReject(ref: string, message: string): void {
    const op = this.pending.get(ref);
    this.pending.delete(ref);
    if (op) this.release(op);
    this.host.notify(message);
    // Put the refused elements back as the server has them.
    if (op) this.renderPage(true);
  }

  onResync(): void {
    this.requestSync();
  }

  // ---- local edits ----

  /** Called (throttled) after the editor changed: sends what differs from the last synced state. */
  flushLocal(): void {
    if (!this.online || this.syncing) return;
    const adds: BoardElement[] = [];
    const updates: BoardElement[] = [];
    const deletes: string[] = [];
    for (const ex of this.host.scene()) {
      if (this.known.get(ex.id) === ex.version) continue;
      this.known.set(ex.id, ex.version);
      if (ex.isDeleted) {
        if (this.confirmed.has(ex.id) || this.pendingIds.has(ex.id)) deletes.push(ex.id);
        continue;
      }
      const el = fromExcalidraw(ex, this.page);
      if (!el) continue;
      if (same(this.confirmed.get(el.id), el)) continue;
      (this.confirmed.has(el.id) || this.pendingIds.has(el.id) ? updates : adds).push(el);
    }
    this.sendOps('element.add', adds);
    this.sendOps('element.update', updates);
    for (let i = 0; i < deletes.length; i += CHUNK) this.submit({ type: 'element.delete', ids: deletes.slice(i, i + CHUNK) });
  }

  /** Operations other than element edits (pages, pin), from the toolbar. */
  submit(op: BoardOp): void {
    const ref = nextRef();
    if (!this.host.send({ type: 'board.op', ref, op })) return;
    this.pending.set(ref, op);
    for (const id of idsOf(op)) this.pendingIds.set(id, (this.pendingIds.get(id) ?? 0) + 1);
  }

  goTo(pageId: string): void {
    if (this.host.role === 'student' && this.pinned && pageId !== this.pinned) {
      this.host.notify('The teacher pinned a page: everyone stays on it for now.');
      return;
    }
    if (!this.pages.some((p) => p.id === pageId) || pageId === this.page) return;
    this.flushLocal();
    this.page = pageId;
    this.renderPage(true);
    this.host.changed(this.view());
  }

  /**
   * Sends elements in operations of at most 100 elements that each fit in one
   * gateway frame. An element too big for a frame on its own is thinned if it
   * is a stroke or line (every other point dropped until it fits); anything
   * else that big stays on this screen only, with a notice.
   */
  private sendOps(type: 'element.add' | 'element.update', els: BoardElement[]): void {
    const budget = this.host.maxFrameBytes - FRAME_OVERHEAD;
    let chunk: BoardElement[] = [];
    let bytes = 0;
    for (const original of els) {
      const el = fitElement(original, budget);
      if (!el) {
        this.host.notify('This drawing is too large to share with the others.');
        continue;
      }
      const size = byteLength(JSON.stringify(el)) + 1;
      if (chunk.length && (chunk.length >= CHUNK || bytes + size > budget)) {
        this.submit({ type, elements: chunk });
        chunk = [];
        bytes = 0;
      }
      chunk.push(el);
      bytes += size;
    }
    if (chunk.length) this.submit({ type, elements: chunk });
  }

  private release(op: BoardOp): void {
    for (const id of idsOf(op)) {
      const n = (this.pendingIds.get(id) ?? 1) - 1;
      if (n <= 0) this.pendingIds.delete(id);
      else this.pendingIds.set(id, n);
    }
  }

  private followPin(): void {
    if (this.pinned && this.host.role === 'student' && this.page !== this.pinned) this.page = this.pinned;
  }

  private applyConfirmed(op: BoardOp): void {
    switch (op.type) {
      case 'element.add':
      case 'element.update':
        for (const el of op.elements) this.confirmed.set(el.id, el);
        return;
      case 'element.delete':
        for (const id of op.ids) this.confirmed.delete(id);
        return;
      case 'page.add': {
        const at = op.after_page_id ? this.pages.findIndex((p) => p.id === op.after_page_id) + 1 : this.pages.length;
        this.pages = [...this.pages.slice(0, at), op.page, ...this.pages.slice(at)];
        return;
      }
      case 'page.rename':
        this.pages = this.pages.map((p) => (p.id === op.page_id ? { ...p, name: op.name } : p));
        return;
      case 'page.delete':
        this.pages = this.pages.filter((p) => p.id !== op.page_id);
        for (const [id, el] of this.confirmed) if (el.page_id === op.page_id) this.confirmed.delete(id);
        if (this.pinned === op.page_id) this.pinned = null;
        if (this.page === op.page_id) this.page = this.pages[0].id;
        return;
      case 'page.reorder': {
        const byId = new Map(this.pages.map((p) => [p.id, p]));
        this.pages = op.page_ids.map((id) => byId.get(id)!).filter(Boolean);
        return;
      }
      case 'page.pin':
        this.pinned = op.page_id;
        return;
    }
  }

  /**
   * Shows the current page: confirmed elements, except those with my changes
   * in flight (the editor has the newer version). `reset` replaces the scene
   * entirely (page switch, refused operation).
   */
  private renderPage(reset = false): void {
    const scene = new Map(this.host.scene().map((e) => [e.id, e]));
    const out: Partial<ExEl>[] = [];
    let changed = reset;
    const onPage = [...this.confirmed.values()].filter((e) => e.page_id === this.page);
    const wanted = new Set(onPage.map((e) => e.id));
    for (const el of onPage) {
      const cur = scene.get(el.id);
      if (cur && !reset && this.pendingIds.has(el.id)) {
        out.push(cur);
        continue;
      }
      const mine = cur && !cur.isDeleted ? fromExcalidraw(cur, this.page) : null;
      if (cur && mine && same(el, mine)) {
        out.push(cur);
        continue;
      }
      const version = (cur?.version ?? 0) + 1;
      out.push(toExcalidraw(el, version, this.host.roughness));
      this.known.set(el.id, version);
      changed = true;
    }
    for (const cur of scene.values()) {
      if (wanted.has(cur.id)) continue;
      if (!reset && (this.pendingIds.has(cur.id) || (!this.confirmed.has(cur.id) && !cur.isDeleted && this.known.get(cur.id) !== cur.version))) {
        out.push(cur); // mine, not sent or not acknowledged yet
        continue;
      }
      if (!cur.isDeleted && (this.known.has(cur.id) || reset)) {
        const version = cur.version + 1;
        out.push({ ...cur, isDeleted: true, version });
        this.known.set(cur.id, version);
        changed = true;
      }
    }
    if (changed) this.host.setScene(out.sort((a, b) => ((a.index ?? '') < (b.index ?? '') ? -1 : (a.index ?? '') > (b.index ?? '') ? 1 : 0)));
  }

  /** After a (re)sync: show the server's page, then send whatever my scene has that the server does not. */
  private reconcile(): void {
    const scene = this.host.scene();
    for (const ex of scene) {
      // Changed locally and not synced (drawn offline, or sent when the connection dropped):
      // if the server lacks it or has it differently, forget its version so flushLocal sends it.
      const dirty = this.known.get(ex.id) !== ex.version || this.unsure.has(ex.id);
      if (!dirty) continue;
      const el = ex.isDeleted ? null : fromExcalidraw(ex, this.page);
      if (el && !same(this.confirmed.get(el.id), el)) this.known.delete(ex.id);
      else if (ex.isDeleted && this.confirmed.get(ex.id)?.page_id === this.page) this.known.delete(ex.id);
      else this.known.set(ex.id, ex.version);
    }
    this.unsure.clear();
    const offline = scene.filter((ex) => !this.known.has(ex.id));
    this.renderPage(false);
    if (offline.length) queueMicrotask(() => this.flushLocal());
  }
}

function idsOf(op: BoardOp): string[] {
  if (op.type === 'element.add' || op.type === 'element.update') return op.elements.map((e) => e.id);
  if (op.type === 'element.delete') return op.ids;
  return [];
}
