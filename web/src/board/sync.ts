import { isNewer, LiveBoard, reduce, withoutSkipped } from '../../../src/board/reducer.js';
import { DEFAULT_PAGES, forNode, NODE_TYPES_BEFORE_LIST, type BoardElement, type BoardOp, type BoardPage, type Tombstone } from '../../../src/board/schema.js';
import { STROKE_DELTA_MAX_POINTS } from '../../../realtime/protocol/limits.js';
import type { ServerMessage } from '../../../realtime/protocol/serverMessages.js';
import type { Role } from '../../../src/domain/enums.js';
import { boundIndex, fromExcalidraw, isSyncable, sameBound, toExcalidraw, type ExEl } from './convert.js';
import { byteLength, fitElement, FRAME_OVERHEAD } from './fit.js';

type StateMsg = Extract<ServerMessage, { type: 'board.state' }>;
type OpsMsg = Extract<ServerMessage, { type: 'board.ops' }>;
type StrokeMsg = Extract<ServerMessage, { type: 'board.stroke' }>;
type Freehand = Extract<BoardElement, { type: 'freehand' }>;
type StrokeOut = { type: 'board.stroke'; id: string; from: number; points: Freehand['points']; head?: Omit<Freehand, 'points'> };

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
  /** replaces the scene without entering the local undo history; `fresh` are skeletons to restore, the rest are the scene's own objects */
  setScene(elements: readonly (ExEl | Partial<ExEl>)[], fresh: Set<string>): void;
  /** forgets the local undo history (another page is shown: its entries would act on elements not in the scene) */
  clearHistory(): void;
  /** a page was put in the scene anew: if nothing of it is in view, scroll to it */
  reveal(): void;
  /** id of the freehand stroke the person is drawing right now, if any */
  drawing(): string | null;
  /** a clock in ms (stroke deltas and commits are paced by it) */
  now(): number;
  send(msg: { type: 'board.op'; ref: string; op: BoardOp } | { type: 'board.sync'; since: number } | StrokeOut): boolean;
  changed(view: SyncView): void;
  notify(text: string): void;
  /** the page this person was on before the page was reloaded (Board.tsx keeps it per lesson), if any */
  lastPage: string | null;
  /** my changes the page had not seen acknowledged when it was last hidden or reloaded (Board.tsx keeps them per lesson and tab) */
  kept: readonly Change[];
  roughness: number;
  role: Role;
  /** largest frame the gateway accepts (a bigger one closes the socket with 4413) */
  maxFrameBytes: number;
}

/** A change a person made, not yet acknowledged: the element as written, or its tombstone. */
export type Change = { kind: 'put'; el: BoardElement } | { kind: 'del'; t: Tombstone; page: string };

const CHUNK = 100;
/**
 * A stroke in progress (docs/protocol.md, "Strokes in progress"): its new
 * points go to the others at most every STROKE_DELTA_MS as `board.stroke`
 * (relayed, not stored); the stroke itself is committed once, when the pen
 * lifts. 200 ms (5 a second) looks live to the others and keeps the frames' own
 * overhead small next to the points. Decision: no periodic commit while the pen
 * moves (the issue allows one every few seconds): a stroke in progress survives
 * a lost connection in the outbox and a reload (Board.tsx keeps it), only
 * closing the tab mid-stroke loses it, and each periodic commit would resend
 * the whole stroke so far (measured: +70% bytes for a 12 s stroke,
 * docs/benchmarks.md).
 */
const STROKE_DELTA_MS = 200;
/** ... and only once this many new points are waiting (or STROKE_DELTA_MAX_MS passed): a frame's own ~70 bytes stay small next to its points */
const STROKE_DELTA_POINTS = 16;
const STROKE_DELTA_MAX_MS = 500;
/** another person's stroke in progress that stopped growing and was never committed disappears after this */
const LIVE_TTL_MS = 5000;
/**
 * Drawing on a page the person may no longer draw on: the pen was down when the page changed under
 * it (docs/board.md, "A page that changes under the pen"). It is never moved to the page now shown.
 */
/** my writes of a type the node does not keep (images during a rolling deploy) */
export const HELD_BACK = 'Images cannot be shared at the moment (the board is being updated): yours stay on your screen and reach the others as soon as they can.';
const LOST_TO_PIN = 'The teacher pinned another page while you were drawing there: that drawing was not kept.';
const LOST_TO_DELETE = 'The page you were drawing on was deleted: that drawing was not kept.';
/** a student's edit refused because it locks, or touches a locked element (docs/board.md, "Locked elements") */
const LOCKED = 'Only the teacher can lock shapes, or change, move or delete locked ones.';
/** the notice when the page a person was on went away while they were not connected */
const PAGE_GONE = 'The page you were on was deleted.';
let refCounter = 0;
const nextRef = () => `r${Date.now().toString(36)}${(refCounter++).toString(36)}`;
const stamp = (v: { version: number; version_nonce: number }) => `${v.version}:${v.version_nonce}`;
const exStamp = (ex: ExEl) => `${ex.version}:${ex.versionNonce}`;
/** the element's content without its version stamp: a version-only bump is not a change */
const content = ({ version: _v, version_nonce: _n, ...rest }: BoardElement) => JSON.stringify(rest);
const changeOf = (c: Change) => (c.kind === 'put' ? c.el : c.t);

/**
 * Keeps the editor and the server's board in step, the way Excalidraw's own
 * collaboration does (docs/protocol.md, "Client rules"):
 *
 * - `board` is the board as the server ordered it, up to `seq` (live
 *   elements of every page). The server applies a write only when it is newer
 *   (version, then the lower nonce), so applying its operations in seq order
 *   keeps this equal to the server's board.
 * - A person's edit is an element whose editor version went past `seen`, the
 *   version this sync last knew for it. Whenever the sync itself puts elements
 *   in the editor (a page shown, remote changes, loading the board), `seen`
 *   takes the versions the editor ends with, so the editor's own housekeeping
 *   during that update (index repair, version bumps) is never taken for an edit.
 * - `mine` holds my changes until they are acknowledged: the editor shows them
 *   over `board` while they are newer, and after a reconnect they are sent
 *   again (a resend of the same version is not newer: the server skips it).
 * - Only the current page is in the editor's scene; other pages live in
 *   `board` only, so pages never share an index space.
 */
export class BoardSync {
  /** the board as the server committed it, kept by the board's one reducer (src/board/reducer.ts) */
  private board = new LiveBoard(DEFAULT_PAGES.map((p) => ({ ...p })));
  private seen = new Map<string, number>();
  /** the stamp of the element each scene element was last rendered from (or detected as) */
  private from = new Map<string, string>();
  private mine = new Map<string, Change>();
  private outbox = new Map<string, Change>();
  private inflight = new Map<string, { op: BoardOp; changes: Change[] }>();
  private seq = 0;
  /** a reload comes back to the page the person was on (when it still exists and no pin says otherwise: onState) */
  private page: string;
  private syncing = false;
  private online = false;
  /** the first board.state was shown: before that the scene is not the board */
  private loaded = false;
  /**
   * The optional element fields the node keeps (its last board.state's optional_fields): the
   * others are left out of what is sent, so a page newer than the node it reaches (a rolling
   * deploy) is not refused. A node from before the list keeps none of them.
   */
  private keeps: ReadonlySet<string> = new Set();
  /**
   * The element types the node keeps (its last board.state's element_types; a node from before the
   * list keeps all but images). My writes of other types wait in the outbox, shown on my screen,
   * until the page reaches a node that keeps them (a rolling deploy; images switched off on a node).
   */
  private types: ReadonlySet<string> = new Set(NODE_TYPES_BEFORE_LIST);
  /** the person was told that their writes wait for another node (once while it lasts) */
  private toldHeld = false;
  /** my stroke in progress: points sent as deltas so far, when the last delta went */
  private stroke: { id: string; sent: number; lastDelta: number } | null = null;
  /** others' strokes in progress, shown until their commit arrives */
  private live = new Map<string, { el: Freehand; at: number }>();
  private liveTimer: ReturnType<typeof setTimeout> | null = null;
  /**
   * The page each element I drew was drawn on. The page shown can change while the pen is down (a pin,
   * a delete, my added page): the rest of that stroke still belongs to the page it started on.
   */
  private placed = new Map<string, string>();
  /**
   * My new drawing on a page I can no longer draw on, dropped with a notice: not taken up again when the
   * editor next touches it (a second notice). Elements the board has stay editable (after an unpin).
   */
  private dropped = new Set<string>();
  /** a page I added, acknowledged: I am taken to it once the board has it (as in any editor with pages) */
  private adding: string | null = null;
  /** changes kept across a reload, taken up with the first board.state (mine and sent again) */
  private kept: readonly Change[];

  constructor(private readonly host: SyncHost) {
    this.page = host.lastPage ?? DEFAULT_PAGES[0].id;
    this.kept = host.kept;
  }

  /**
   * The page is going away: sends what the editor holds that was not sent yet (while the connection
   * may still take it), and returns my changes not yet acknowledged, for the page to keep across a
   * reload: a stroke finished a moment before may not have reached the server, or its commit may not
   * have been told. Sent again after the reload: a write the server already has is not newer and is
   * skipped (docs/board.md, "A reload right after drawing").
   */
  leaving(): Change[] {
    if (!this.loaded) return [...this.kept];
    this.flushLocal();
    return [...this.mine.values()];
  }

  /** Whether the node I am on keeps elements of this type (a write of another waits for one that does). */
  takes(type: BoardElement['type']): boolean {
    return this.types.has(type);
  }

  private holdsBack(): boolean {
    return [...this.outbox.values()].some((c) => c.kind === 'put' && !this.types.has(c.el.type));
  }

  view(): SyncView {
    return { pages: this.board.pages, pinned: this.board.pinned_page_id, page: this.page, seq: this.seq };
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
    // unacknowledged operations may or may not have been applied: send them again after the sync
    for (const { changes } of this.inflight.values()) for (const c of changes) this.requeue(c);
    this.inflight.clear();
  }

  private requeue(c: Change): void {
    const id = changeOf(c).id;
    if (this.mine.get(id) === c && !this.outbox.has(id)) this.outbox.set(id, c);
  }

  private requestSync(): void {
    if (this.syncing) return;
    this.syncing = this.host.send({ type: 'board.sync', since: this.seq });
  }

  // ---- server messages ----

  onState(msg: StateMsg): void {
    this.syncing = false;
    if (this.loaded && msg.seq < this.seq) {
      // read before operations I applied meanwhile (the answer and the live stream cross): stale, ask again
      this.requestSync();
      return;
    }
    this.detect(); // what the person drew so far belongs to the page shown until now
    this.keeps = new Set(msg.optional_fields ?? []); // (absent from a node older than the list)
    this.types = new Set(msg.element_types ?? NODE_TYPES_BEFORE_LIST);
    if (!this.holdsBack()) this.toldHeld = false;
    if (msg.full) this.board.elements.clear();
    for (const id of msg.deleted_ids) this.board.elements.delete(id);
    for (const el of msg.elements) this.board.elements.set(el.id, el);
    this.seq = msg.seq;
    this.board.pages = msg.pages;
    this.board.pinned_page_id = msg.pinned_page_id;
    const first = !this.loaded;
    this.loaded = true;
    if (first) this.takeUpKept();
    const page = this.page;
    // my page was deleted while I was away (or before a reload that remembered it: not a newcomer's page-1)
    const gone = !this.board.pages.some((p) => p.id === this.page);
    if (gone) this.page = this.board.pages[0].id;
    this.followPin();
    // another page than before (mine was deleted, or a pin moved me, while I was away): as a page switch
    this.render(first || page !== this.page);
    this.host.changed(this.view());
    if (gone && (!first || this.host.lastPage === page)) this.host.notify(PAGE_GONE);
    this.enterAdded();
    this.adding = null; // a whole state: a page it does not have is not coming
    this.flush(); // what I drew offline, and what was in flight when the connection dropped
  }

  onOps(msg: OpsMsg): void {
    if (!this.loaded) return; // the first board.state covers them (or, if read before them, the next gap asks again)
    const page = this.page;
    const name = this.board.pages.find((p) => p.id === page)?.name;
    // what the person drew so far (a stroke in progress too) belongs to the page shown until now,
    // not to the one a pin or a delete below may put on screen
    this.detect();
    for (const { seq, op } of msg.ops) {
      if (seq <= this.seq) continue;
      if (seq !== this.seq + 1) {
        this.requestSync(); // a gap: the state answer covers the rest
        break;
      }
      this.seq = seq;
      this.applyConfirmed(op as BoardOp);
    }
    this.followPin();
    this.render(page !== this.page);
    this.host.changed(this.view());
    // someone else deleted the page I was on: say why the board changed under me (my own delete comes as an ack)
    if (!this.board.pages.some((p) => p.id === page)) this.host.notify(`The teacher deleted "${name}", the page you were on.`);
  }

  onAck(ref: string, seq: number | null, skipped: string[] = [], restamped: Tombstone[] = []): void {
    const sent = this.inflight.get(ref);
    this.inflight.delete(ref);
    const page = this.page;
    if (seq !== null && seq > this.seq && this.loaded) {
      if (seq !== this.seq + 1) this.requestSync();
      else {
        this.seq = seq;
        if (sent) this.applyConfirmed(withoutSkipped(sent.op, skipped, restamped));
      }
    }
    if (sent) for (const c of sent.changes) this.settle(c);
    // an element of mine that lost to a newer version now shows the server's; a teacher's write the
    // server stamped higher takes that stamp in the editor too
    // my own delete of the page I am on moves me to another one: shown as a page switch (it stayed on screen)
    if (page !== this.page) this.render(true);
    // ... and an element operation not made in the editor (a PDF's page image) is shown once it is committed
    else if (sent && (seq === null || skipped.length || restamped.length || !sent.changes.length)) this.render(false);
    this.host.changed(this.view());
    if (sent?.op.type === 'page.add' && seq !== null) {
      this.adding = sent.op.page.id;
      this.enterAdded(); // or, after a gap, once the state asked for has it
    }
  }

  private enterAdded(): void {
    const id = this.adding;
    if (!id || !this.board.pages.some((p) => p.id === id)) return;
    this.adding = null;
    this.goTo(id);
  }

  onReject(ref: string, code: string, message: string): void {
    const sent = this.inflight.get(ref);
    this.inflight.delete(ref);
    // a drawing that crossed a pin or a page delete on its way: a sentence, not the rule's id-laden text
    const drawing = sent && sent.changes.length > 0;
    const lost = drawing && code === 'pinned' ? LOST_TO_PIN : drawing && code === 'not_found' ? LOST_TO_DELETE : null;
    // an element operation refused as forbidden is about locking (the server's text names element ids)
    this.host.notify(lost ?? (drawing && code === 'forbidden' ? LOCKED : message));
    // its elements are not taken up again when the editor next touches them (a second refusal)
    if (lost && sent) for (const c of sent.changes) this.drop(changeOf(c).id);
    if (!sent) return;
    for (const c of sent.changes) this.settle(c);
    this.render(false); // put the refused elements back as the server has them
  }

  onResync(): void {
    this.requestSync();
  }

  private settle(c: Change): void {
    const id = changeOf(c).id;
    if (this.mine.get(id) === c) this.mine.delete(id);
  }

  // ---- local edits ----

  /** Records what a person changed in the editor since the sync last looked (called on every editor change). */
  detect(): void {
    if (!this.loaded) return;
    for (const ex of this.host.scene()) {
      if (!isSyncable(ex) || this.dropped.has(ex.id)) continue;
      const known = this.seen.get(ex.id);
      if (known !== undefined && ex.version <= known) continue;
      this.seen.set(ex.id, ex.version);
      this.from.set(ex.id, exStamp(ex));
      const mine = this.mine.get(ex.id);
      const page = this.board.elements.get(ex.id)?.page_id ?? this.placed.get(ex.id) ?? this.page;
      if (ex.isDeleted) {
        if (mine?.kind === 'put' && this.outbox.get(ex.id) === mine && !this.board.elements.has(ex.id) && !this.inInflight(ex.id)) {
          // drawn and erased before it was sent: nobody else ever had it
          this.mine.delete(ex.id);
          this.outbox.delete(ex.id);
        } else if (this.board.elements.has(ex.id) || mine) {
          this.record({ kind: 'del', t: { id: ex.id, version: ex.version, version_nonce: ex.versionNonce }, page });
        }
        continue;
      }
      const el = fromExcalidraw(ex, page);
      if (!el) continue;
      // a version bump that changed nothing (e.g. the editor finishing a stroke it already has) is not sent
      const last = mine ? (mine.kind === 'put' ? mine.el : null) : this.board.elements.get(el.id);
      if (last && content(last) === content(el)) {
        this.from.set(ex.id, stamp(last)); // the scene object shows that write: keep it on screen as is
        continue;
      }
      this.record({ kind: 'put', el });
    }
  }

  private record(c: Change): void {
    const id = changeOf(c).id;
    this.placed.set(id, c.kind === 'put' ? c.el.page_id : c.page);
    this.mine.set(id, c);
    this.outbox.set(id, c);
  }

  /** What the page kept across a reload becomes mine again (shown while newer than the board, sent by the flush). */
  private takeUpKept(): void {
    for (const c of this.kept) if (!this.mine.has(changeOf(c).id)) this.record(c);
    this.kept = [];
  }

  private inInflight(id: string): boolean {
    for (const { changes } of this.inflight.values()) if (changes.some((c) => changeOf(c).id === id)) return true;
    return false;
  }

  /** Called (throttled) after the editor changed: sends what a person changed. */
  flushLocal(): void {
    this.detect();
    this.flush();
  }

  private flush(): void {
    if (!this.online || this.syncing || !this.loaded || !this.outbox.size) return;
    const held = this.streamStroke();
    const adds: Change[] = [];
    const updates: Change[] = [];
    const deletes: Change[] = [];
    let lost: string | null = null;
    const waiting: Change[] = [];
    for (const c of this.outbox.values()) {
      if (c.kind === 'put' && !this.types.has(c.el.type)) {
        // a type this node does not keep: it waits, on my screen, for a node that does
        waiting.push(c);
        continue;
      }
      const why = changeOf(c).id === held ? null : this.cannotDrawOn(c.kind === 'put' ? c.el.page_id : c.page);
      if (why) {
        // drawn on a page deleted or pinned away while the pen was down: dropped here, never sent to the
        // page now shown (nor to the server, which would refuse it)
        lost = why;
        this.drop(changeOf(c).id);
        this.outbox.delete(changeOf(c).id);
        this.settle(c);
        continue;
      }
      if (c.kind === 'del') deletes.push(c);
      else if (c.el.id !== held) (this.board.elements.has(c.el.id) ? updates : adds).push(c);
    }
    if (lost) {
      this.host.notify(lost);
      this.render(false); // the dropped stroke goes from the screen too
    }
    const keep = held ? this.outbox.get(held) : undefined;
    this.outbox.clear();
    if (keep) this.outbox.set(held!, keep);
    for (const c of waiting) this.outbox.set(changeOf(c).id, c);
    if (waiting.length && !this.toldHeld) {
      this.toldHeld = true;
      this.host.notify(HELD_BACK);
    }
    this.sendElements('element.add', adds);
    this.sendElements('element.update', updates);
    for (let i = 0; i < deletes.length; i += CHUNK) {
      const chunk = deletes.slice(i, i + CHUNK);
      this.submitOp({ type: 'element.delete', elements: chunk.map((c) => (c as Extract<Change, { kind: 'del' }>).t) }, chunk);
    }
  }

  private drop(id: string): void {
    if (!this.board.elements.has(id)) this.dropped.add(id);
  }

  /** Why I can no longer draw on this page (a notice), or null when I can. */
  private cannotDrawOn(pageId: string): string | null {
    if (!this.board.pages.some((p) => p.id === pageId)) return LOST_TO_DELETE;
    if (this.host.role === 'student' && this.board.pinned_page_id && pageId !== this.board.pinned_page_id) return LOST_TO_PIN;
    return null;
  }

  /**
   * The stroke being drawn: sends its new points as a delta when one is due,
   * and returns its id (it stays in the outbox until the pen lifts).
   */
  private streamStroke(): string | null {
    const id = this.host.drawing();
    const c = id ? this.outbox.get(id) : undefined;
    if (!id || c?.kind !== 'put' || c.el.type !== 'freehand') {
      this.stroke = null;
      return null;
    }
    const now = this.host.now();
    if (this.stroke?.id !== id) this.stroke = { id, sent: 0, lastDelta: -Infinity };
    if (c.el.page_id !== this.page) return id; // the page changed under the pen: nobody is shown it growing there
    const st = this.stroke;
    const waiting = c.el.points.length - st.sent;
    const since = now - st.lastDelta;
    if (waiting > 0 && since >= STROKE_DELTA_MS && (waiting >= STROKE_DELTA_POINTS || since >= STROKE_DELTA_MAX_MS || st.sent === 0)) {
      const { points, ...head } = c.el;
      for (let from = st.sent; from < points.length; from += STROKE_DELTA_MAX_POINTS) {
        this.host.send({ type: 'board.stroke', id, from, points: points.slice(from, from + STROKE_DELTA_MAX_POINTS), ...(from === 0 ? { head } : {}) });
      }
      st.sent = points.length;
      st.lastDelta = now;
    }
    return id;
  }

  /** Someone's stroke in progress: shown as it grows, until its commit arrives. */
  onStroke(msg: StrokeMsg): void {
    let l = this.live.get(msg.id);
    if (msg.from === 0 && msg.head) l = { el: { ...msg.head, points: msg.points } as Freehand, at: 0 };
    else if (l && msg.from <= l.el.points.length) l = { el: { ...l.el, points: [...l.el.points.slice(0, msg.from), ...msg.points] }, at: 0 };
    else return; // joined in the middle of it: the commit will show it
    const conf = this.board.elements.get(msg.id);
    if (conf?.type === 'freehand' && conf.points.length >= l.el.points.length) return;
    l.at = this.host.now();
    this.live.set(msg.id, l);
    if (this.liveTimer) clearTimeout(this.liveTimer);
    this.liveTimer = setTimeout(() => {
      this.liveTimer = null;
      this.render(false); // a stroke whose commit never came goes away
    }, LIVE_TTL_MS + 50);
    if (l.el.page_id === this.page) this.render(false);
  }

  /** Operations other than element edits (pages, pin), from the toolbar. */
  submit(op: BoardOp): void {
    this.submitOp(op, []);
  }

  private submitOp(op: BoardOp, changes: Change[]): void {
    const ref = nextRef();
    if (!this.host.send({ type: 'board.op', ref, op })) {
      for (const c of changes) this.requeue(c);
      // drawing is kept and sent after the reconnect; a page operation is not (it could land on a board
      // changed meanwhile): say so rather than let the click do nothing
      if (!changes.length) this.host.notify('Not connected: the board is reconnecting. Try again in a moment.');
      return;
    }
    this.inflight.set(ref, { op, changes });
  }

  goTo(pageId: string): void {
    if (this.host.role === 'student' && this.board.pinned_page_id && pageId !== this.board.pinned_page_id) {
      this.host.notify('The teacher pinned a page: everyone stays on it for now.');
      return;
    }
    if (!this.board.pages.some((p) => p.id === pageId) || pageId === this.page) return;
    this.flushLocal();
    this.page = pageId;
    this.render(true);
    this.host.changed(this.view());
  }

  /**
   * Sends elements in operations of at most 100 elements that each fit in one
   * gateway frame. An element too big for a frame on its own is thinned if it
   * is a stroke or line (every other point dropped until it fits); anything
   * else that big stays on this screen only, with a notice.
   */
  private sendElements(type: 'element.add' | 'element.update', changes: Change[]): void {
    const budget = this.host.maxFrameBytes - FRAME_OVERHEAD;
    let chunk: BoardElement[] = [];
    let carried: Change[] = [];
    let bytes = 0;
    for (const c of changes) {
      const el = fitElement(forNode((c as Extract<Change, { kind: 'put' }>).el, this.keeps), budget);
      if (!el) {
        this.host.notify('This drawing is too large to share with the others.');
        this.settle(c);
        continue;
      }
      const size = byteLength(JSON.stringify(el)) + 1;
      if (chunk.length && (chunk.length >= CHUNK || bytes + size > budget)) {
        this.submitOp({ type, elements: chunk }, carried);
        chunk = [];
        carried = [];
        bytes = 0;
      }
      chunk.push(el);
      carried.push(c);
      bytes += size;
    }
    if (chunk.length) this.submitOp({ type, elements: chunk }, carried);
  }

  private followPin(): void {
    if (this.board.pinned_page_id && this.host.role === 'student' && this.page !== this.board.pinned_page_id) this.page = this.board.pinned_page_id;
  }

  /** A committed operation: the shared reducer applies it to `board`; what it means for this screen follows. */
  private applyConfirmed(op: BoardOp): void {
    const applied = reduce(this.board, op);
    if (!applied) return;
    const done = applied.op;
    if (done.type === 'element.add' || done.type === 'element.update') {
      for (const el of done.elements) {
        const l = this.live.get(el.id);
        if (l && (el.type !== 'freehand' || el.points.length >= l.el.points.length)) this.live.delete(el.id);
      }
    } else if (done.type === 'element.delete') {
      for (const t of done.elements) this.live.delete(t.id);
    } else if (done.type === 'page.delete' && this.page === done.page_id) {
      this.page = this.board.pages[0].id;
    }
  }

  /**
   * Shows the current page: the confirmed elements, with my unacknowledged
   * changes over them while they are newer. Scene objects that already show
   * the wanted version are passed back untouched (a stroke being drawn keeps
   * going). `pageChanged`: another page (or the first load) replaces the
   * scene and the undo history.
   */
  private render(pageChanged: boolean): void {
    this.detect(); // nothing a person did may be mistaken for housekeeping below
    const scene = pageChanged ? new Map<string, ExEl>() : new Map(this.host.scene().map((e) => [e.id, e]));
    const out: (ExEl | Partial<ExEl>)[] = [];
    const fresh = new Set<string>();
    let changed = pageChanged;
    const wanted = new Map<string, { el: BoardElement | null; tomb?: Tombstone; stamp: string }>();
    for (const el of this.board.elements.values()) if (el.page_id === this.page) wanted.set(el.id, { el, stamp: stamp(el) });
    const now = this.host.now();
    for (const [id, l] of this.live) {
      if (now - l.at > LIVE_TTL_MS) this.live.delete(id);
      else if (l.el.page_id === this.page && !this.mine.has(id)) wanted.set(id, { el: l.el, stamp: `live:${l.el.points.length}` });
    }
    for (const c of this.mine.values()) {
      const id = changeOf(c).id;
      const conf = this.board.elements.get(id);
      if (c.kind === 'put') {
        if (c.el.page_id === this.page && !(conf && isNewer(conf, c.el))) wanted.set(id, { el: c.el, stamp: stamp(c.el) });
      } else if (c.page === this.page && !(conf && isNewer(conf, c.t))) {
        wanted.set(id, { el: conf ?? null, tomb: c.t, stamp: stamp(c.t) });
      }
    }
    // labels and arrows attached to a shape: the shape's side of the relation follows from theirs
    const bound = boundIndex([...wanted.values()].flatMap((w) => (w.el && !w.tomb ? [w.el] : [])));
    for (const [id, w] of wanted) {
      const cur = scene.get(id);
      const want = w.stamp;
      if (cur && this.from.get(id) === want && cur.isDeleted === !!w.tomb) {
        const b = bound.get(id) ?? null;
        if (w.tomb || sameBound(cur.boundElements, b)) out.push(cur);
        else {
          changed = true;
          out.push({ ...cur, boundElements: b });
        }
        continue;
      }
      changed = true;
      this.from.set(id, want);
      if (w.tomb) {
        if (cur) out.push({ ...cur, isDeleted: true, version: w.tomb.version, versionNonce: w.tomb.version_nonce });
        else if (w.el) {
          out.push({ ...toExcalidraw(w.el, this.host.roughness), isDeleted: true, version: w.tomb.version, versionNonce: w.tomb.version_nonce });
          fresh.add(id);
        }
        continue;
      }
      out.push(toExcalidraw(w.el!, this.host.roughness, bound.get(id)));
      fresh.add(id);
    }
    for (const cur of scene.values()) {
      if (wanted.has(cur.id)) continue;
      if (!isSyncable(cur) || cur.isDeleted) {
        out.push(cur); // deleted here earlier: kept, so the person's undo can bring it back
        continue;
      }
      // deleted by someone else (or my write of it lost): show it deleted
      changed = true;
      out.push({ ...cur, isDeleted: true, version: cur.version + 1 });
    }
    if (!changed) return;
    out.sort((a, b) => ((a.index ?? '') < (b.index ?? '') ? -1 : (a.index ?? '') > (b.index ?? '') ? 1 : a.id! < b.id! ? -1 : 1));
    this.host.setScene(out, fresh);
    if (pageChanged) {
      this.host.clearHistory();
      this.host.reveal();
    }
    // whatever the editor did to them while taking them in is not a person's edit
    for (const ex of this.host.scene()) this.seen.set(ex.id, ex.version);
  }
}
