import { boardError } from './errors.js';
import { BOARD_LIMITS as L, textSurcharge } from './limits.js';
import { elementIdsOf, isNewer, partition, reduce, type Applied, type BoardReplica, type Versioned } from './reducer.js';
import { elementRefs, MAX_VERSION, STUDENT_MAX_VERSION, VERSION_STEP, type BoardElement, type BoardOp, type BoardPage, type Tombstone } from './schema.js';
import type { Role } from '../domain/enums.js';

/** Who sends an operation: the rules differ for teachers and students. */
export interface Actor {
  role: Role;
  /** the author's public id in the lesson, written to the board's history (absent: a tool or a test) */
  person_id?: string;
}

/** The board row: everything but the elements. */
export interface BoardHead {
  seq: number;
  pages: BoardPage[];
  pinned_page_id: string | null;
  live_elements: number;
  live_bytes: number;
  first_content_seq: number | null;
}

/** What the rules need to know about an element that exists (live or tombstone). */
export interface ElementState {
  page_id: string;
  deleted: boolean;
  bytes: number;
  version: number;
  version_nonce: number;
  /** live and locked: only a teacher may change, delete or unlock it */
  locked: boolean;
}

/** An element's final state after a batch, to be written by the store. */
export interface ElementWrite {
  id: string;
  page_id: string;
  z: string;
  data: BoardElement | null;
  /** `data` as JSON, stringified once (the size check measured this text) */
  json: string | null;
  bytes: number;
  deleted: boolean;
  seq: number;
  version: number;
  version_nonce: number;
}

/** An element's JSON, as stored (its bytes are what the limits count). */
const elementJson = (el: BoardElement): string => JSON.stringify(el);
export const elementBytes = (el: BoardElement): number => Buffer.byteLength(elementJson(el), 'utf8');

/**
 * Applies a batch of operations, one after the other, to a board loaded in
 * memory: checks each against the board as the previous ones left it (who may
 * do what, the pin, the limits), assigns the next sequence number to each
 * accepted one, and applies it with the board's one reducer
 * (src/board/reducer.ts, which the page runs too), recording the writes. Pure
 * (no I/O): the store loads what it needs and persists the result inside one
 * transaction, so the rules are tested without a database and two gateway
 * nodes can never apply operations against different states.
 */
export class BoardWork implements BoardReplica {
  readonly writes = new Map<string, ElementWrite>();
  headChanged = false;
  /** the sequence number of the operation being reduced (put and remove record it) */
  private seq = 0;
  /** JSON and bytes of the elements the last check accepted: each is stringified once */
  private sized = new Map<BoardElement, { json: string; bytes: number }>();

  constructor(
    readonly head: BoardHead,
    /** every element the batch names, plus every element of pages it deletes */
    readonly elements: Map<string, ElementState>,
  ) {}

  get pages(): BoardPage[] {
    return this.head.pages;
  }

  set pages(pages: BoardPage[]) {
    this.head.pages = pages;
  }

  get pinned_page_id(): string | null {
    return this.head.pinned_page_id;
  }

  set pinned_page_id(id: string | null) {
    this.head.pinned_page_id = id;
  }

  /**
   * Applies one operation. Returns the operation as applied (an update or
   * delete loses the writes that are not newer, listed in `skipped`) with its
   * sequence number, or null when nothing was left to apply. Throws
   * BoardOpError when refused; a refused operation changes nothing.
   */
  apply(op: BoardOp, actor: Actor): { seq: number; op: BoardOp; skipped?: string[]; restamped?: Tombstone[] } | null {
    const { op: stamped, restamped } = actor.role === 'teacher' ? this.restamp(op) : { op, restamped: [] };
    const checked = this.check(stamped, actor);
    // after the rules of who may do what (a locked element is `forbidden` whatever its stamp), on the stamps as sent
    this.requireVersions(op, actor);
    if (!checked) return null;
    this.seq = this.head.seq + 1;
    reduce(this, checked.op);
    this.sized.clear();
    this.head.seq = this.seq;
    this.headChanged = true;
    return {
      seq: this.seq,
      op: checked.op,
      ...(checked.skipped.length ? { skipped: checked.skipped } : {}),
      ...(restamped.length ? { restamped } : {}),
    };
  }

  /**
   * Would this operation be accepted as things stand? Throws the BoardOpError it would be refused
   * with; changes nothing. (A stroke in progress is checked this way when it starts.)
   */
  admit(op: BoardOp, actor: Actor): void {
    this.check(actor.role === 'teacher' ? this.restamp(op).op : op, actor);
    this.requireVersions(op, actor);
    this.sized.clear();
  }

  /**
   * No write raises an element's version more than VERSION_STEP above the stored one (above 0 for
   * a new element), and a student's never past STUDENT_MAX_VERSION: nobody can stamp an element
   * out of the teacher's reach or push a version to the top of its range (docs/board.md, "Who
   * keeps the board").
   */
  private requireVersions(op: BoardOp, actor: Actor): void {
    if (op.type !== 'element.add' && op.type !== 'element.update' && op.type !== 'element.delete') return;
    const top = actor.role === 'teacher' ? MAX_VERSION : STUDENT_MAX_VERSION;
    for (const w of op.elements) {
      const stored = this.elements.get(w.id)?.version ?? 0;
      const limit = Math.min(stored + VERSION_STEP, top);
      if (w.version > limit) {
        throw boardError('invalid', `element ${w.id}: version ${w.version} is above ${limit} (at most ${VERSION_STEP} above the stored ${stored}${actor.role === 'teacher' ? '' : `, and at most ${STUDENT_MAX_VERSION} for a student`})`);
      }
    }
  }

  /**
   * The teacher's write of an element wins whatever is stored: a write that would lose (not newer
   * than the stored stamp, e.g. a student's concurrent edit came first) is stamped one above the
   * stored version, with its own nonce. The sender hears the new stamps in its ack (`restamped`).
   */
  private restamp(op: BoardOp): { op: BoardOp; restamped: Tombstone[] } {
    if (op.type !== 'element.add' && op.type !== 'element.update' && op.type !== 'element.delete') return { op, restamped: [] };
    const restamped: Tombstone[] = [];
    const bump = <T extends Tombstone>(w: T): T => {
      const cur = this.elements.get(w.id);
      // a delete of an element that is already deleted (or never was) is not the teacher's to force
      if (!cur || isNewer(w, cur) || (op.type === 'element.delete' && cur.deleted)) return w;
      const version = Math.min(cur.version + 1, MAX_VERSION);
      const version_nonce = version === cur.version ? -(2 ** 31) : w.version_nonce;
      restamped.push({ id: w.id, version, version_nonce });
      return { ...w, version, version_nonce };
    };
    const elements = (op.elements as Tombstone[]).map(bump);
    return { op: restamped.length ? ({ ...op, elements } as BoardOp) : op, restamped };
  }

  private page(id: string): BoardPage | undefined {
    return this.head.pages.find((p) => p.id === id);
  }

  private live(id: string): ElementState | undefined {
    const e = this.elements.get(id);
    return e && !e.deleted ? e : undefined;
  }

  private requirePinnedPage(actor: Actor, pageIds: string[]): void {
    const pinned = this.head.pinned_page_id;
    if (actor.role === 'student' && pinned && pageIds.some((p) => p !== pinned)) {
      throw boardError('pinned', 'a page is pinned: students can only draw on the pinned page');
    }
  }

  private requireTeacher(actor: Actor, what: string): void {
    if (actor.role !== 'teacher') throw boardError('forbidden', `only a teacher can ${what}`);
  }

  private requireDistinct(ids: { id: string }[]): void {
    const seen = new Set<string>();
    for (const { id } of ids) {
      if (seen.has(id)) throw boardError('invalid', `element ${id} appears twice`);
      seen.add(id);
    }
  }

  /** Validates an operation; returns the part of it that will be applied and the ids of the writes that lost. */
  private check(op: BoardOp, actor: Actor): Applied | null {
    switch (op.type) {
      case 'element.add':
      case 'element.update': {
        this.requireDistinct(op.elements);
        for (const el of op.elements) {
          this.requireUnlocked(actor, el.id, this.elements.get(el.id));
          if (el.locked && actor.role !== 'teacher') throw boardError('forbidden', `only the teacher can lock element ${el.id}`);
        }
        // add and update are one rule, Excalidraw's: the write is applied when it is newer
        // than what is stored (live or tombstone: a newer version revives a deleted element)
        const applied = partition(op, (id) => this.elements.get(id));
        if (applied?.op.type !== op.type) return null;
        let bytes = 0;
        let added = 0;
        for (const el of applied.op.elements) {
          if (!this.page(el.page_id)) throw boardError('not_found', `page ${el.page_id} does not exist`);
          const json = elementJson(el);
          const b = Buffer.byteLength(json, 'utf8');
          if (b > L.bytesPerElement) throw boardError('too_large', `element ${el.id} is larger than ${L.bytesPerElement} bytes`);
          const live = this.live(el.id);
          this.requirePinnedPage(actor, live ? [live.page_id, el.page_id] : [el.page_id]);
          const weighted = b + textSurcharge(el);
          this.sized.set(el, { json, bytes: weighted });
          bytes += weighted - (live?.bytes ?? 0);
          if (!live) added += 1;
        }
        this.requireRoom(added, bytes);
        this.requireSamePageRefs(applied.op.elements);
        return applied;
      }
      case 'element.delete': {
        this.requireDistinct(op.elements);
        for (const t of op.elements) this.requireUnlocked(actor, t.id, this.elements.get(t.id));
        const applied = partition(op, (id) => this.elements.get(id));
        if (applied?.op.type !== 'element.delete') return null;
        this.requirePinnedPage(actor, applied.op.elements.map((t) => this.elements.get(t.id)!.page_id));
        return applied;
      }
      case 'page.add': {
        if (actor.role === 'student' && this.head.pinned_page_id) throw boardError('pinned', 'a page is pinned: students cannot add pages');
        if (this.page(op.page.id)) throw boardError('conflict', `page ${op.page.id} exists already`);
        if (this.head.pages.length >= L.pages) throw boardError('board_full', `a board has at most ${L.pages} pages`);
        if (op.after_page_id && !this.page(op.after_page_id)) throw boardError('not_found', `page ${op.after_page_id} does not exist`);
        return { op, skipped: [] };
      }
      case 'page.rename': {
        if (!this.page(op.page_id)) throw boardError('not_found', `page ${op.page_id} does not exist`);
        return { op, skipped: [] };
      }
      case 'page.delete': {
        this.requireTeacher(actor, 'delete pages');
        if (!this.page(op.page_id)) throw boardError('not_found', `page ${op.page_id} does not exist`);
        if (this.head.pages.length === 1) throw boardError('invalid', 'the last page cannot be deleted');
        return { op, skipped: [] };
      }
      case 'page.reorder': {
        this.requireTeacher(actor, 'reorder pages');
        const current = new Set(this.head.pages.map((p) => p.id));
        const given = new Set(op.page_ids);
        if (given.size !== op.page_ids.length || given.size !== current.size || op.page_ids.some((id) => !current.has(id))) {
          throw boardError('invalid', 'page_ids must list every page of the board exactly once');
        }
        return { op, skipped: [] };
      }
      case 'page.pin': {
        this.requireTeacher(actor, 'pin pages');
        if (op.page_id && !this.page(op.page_id)) throw boardError('not_found', `page ${op.page_id} does not exist`);
        if (op.page_id === this.head.pinned_page_id) return null;
        return { op, skipped: [] };
      }
      default: {
        const never: never = op;
        throw boardError('invalid', `unknown operation ${(never as { type: string }).type}`);
      }
    }
  }

  /**
   * A label's shape and an arrow's ends are on the element's own page (the
   * editor shows one page at a time, so only a hand-written client could do
   * otherwise) and are not the element itself. A reference to an element that
   * does not exist or was deleted is kept: it may arrive later in the order, or
   * come back by an undo, and readers treat a dangling one as absent.
   */
  private requireSamePageRefs(elements: BoardElement[]): void {
    const inOp = new Map(elements.map((e) => [e.id, e.page_id]));
    for (const el of elements) {
      for (const ref of elementRefs(el)) {
        if (ref === el.id) throw boardError('invalid', `element ${el.id} refers to itself`);
        const page = inOp.get(ref) ?? this.live(ref)?.page_id;
        if (page !== undefined && page !== el.page_id) throw boardError('invalid', `element ${el.id} refers to ${ref}, which is on another page`);
      }
    }
  }

  /** A locked element is the teacher's: students can neither change, delete nor unlock it (docs/board.md, "Locked elements"). */
  private requireUnlocked(actor: Actor, id: string, cur: ElementState | undefined): void {
    if (actor.role !== 'teacher' && cur && !cur.deleted && cur.locked) throw boardError('forbidden', `element ${id} is locked by the teacher`);
  }

  private requireRoom(addElements: number, addBytes: number): void {
    if (this.head.live_elements + addElements > L.elementsPerBoard) {
      throw boardError('board_full', `a board holds at most ${L.elementsPerBoard} elements`);
    }
    if (this.head.live_bytes + addBytes > L.bytesPerBoard) {
      throw boardError('board_full', `a board holds at most ${L.bytesPerBoard} bytes of elements (a character of text counts ${L.textWeight})`);
    }
  }

  // ---- BoardReplica: what the reducer changes ----

  stamp(id: string): ElementState | undefined {
    return this.elements.get(id);
  }

  *livePage(pageId: string): Iterable<[string, ElementState]> {
    for (const [id, e] of this.elements) if (e.page_id === pageId && !e.deleted) yield [id, e];
  }

  put(el: BoardElement): void {
    const prev = this.live(el.id);
    const { json, bytes } = this.sized.get(el) ?? { json: elementJson(el), bytes: elementBytes(el) + textSurcharge(el) };
    this.head.live_bytes += bytes - (prev?.bytes ?? 0);
    if (!prev) this.head.live_elements += 1;
    const v = { version: el.version, version_nonce: el.version_nonce };
    this.elements.set(el.id, { page_id: el.page_id, deleted: false, bytes, locked: el.locked, ...v });
    this.writes.set(el.id, { id: el.id, page_id: el.page_id, z: el.z, data: el, json, bytes, deleted: false, seq: this.seq, ...v });
    this.head.first_content_seq ??= this.seq;
  }

  /** Leaves a tombstone with the delete's version: only a newer write brings the element back. */
  remove(id: string, v: Versioned): void {
    const prev = this.elements.get(id);
    if (!prev) return;
    if (!prev.deleted) {
      this.head.live_bytes -= prev.bytes;
      this.head.live_elements -= 1;
    }
    const stamp = { version: v.version, version_nonce: v.version_nonce };
    this.elements.set(id, { ...prev, deleted: true, bytes: 0, locked: false, ...stamp });
    const z = this.writes.get(id)?.z ?? '0';
    this.writes.set(id, { id, page_id: prev.page_id, z, data: null, json: null, bytes: 0, deleted: true, seq: this.seq, ...stamp });
  }
}

/** Ids of the elements a batch names, and of those its elements refer to (the store loads their state first). */
export function referencedElementIds(ops: BoardOp[]): string[] {
  const refs = ops.flatMap((op) => (op.type === 'element.add' || op.type === 'element.update' ? op.elements.flatMap(elementRefs) : []));
  return [...new Set([...ops.flatMap(elementIdsOf), ...refs])];
}

/** Pages a batch deletes (the store loads their live elements first). */
export function deletedPageIds(ops: BoardOp[]): string[] {
  return ops.flatMap((op) => (op.type === 'page.delete' ? [op.page_id] : []));
}
