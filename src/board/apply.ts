import { boardError } from './errors.js';
import { BOARD_LIMITS as L, textSurcharge } from './limits.js';
import { isNewer, type BoardElement, type BoardOp, type BoardPage, type Tombstone } from './schema.js';
import type { Role } from '../domain/enums.js';

/** Who sends an operation: the rules differ for teachers and students. */
export interface Actor {
  role: Role;
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
  bytes: number;
  deleted: boolean;
  seq: number;
  version: number;
  version_nonce: number;
}

export const elementBytes = (el: BoardElement): number => Buffer.byteLength(JSON.stringify(el), 'utf8');

/**
 * Applies a batch of operations, one after the other, to a board loaded in
 * memory: validates each against the board as the previous ones left it,
 * assigns the next sequence number to each applied one, and records the
 * writes. Pure (no I/O): the store loads what it needs and persists the result
 * inside one transaction, so the rules are tested without a database and two
 * gateway nodes can never apply operations against different states.
 */
export class BoardWork {
  readonly writes = new Map<string, ElementWrite>();
  headChanged = false;

  constructor(
    readonly head: BoardHead,
    /** every element the batch names, plus every element of pages it deletes */
    readonly elements: Map<string, ElementState>,
  ) {}

  /**
   * Applies one operation. Returns the operation as applied (an update or
   * delete loses the elements that no longer exist) with its sequence number,
   * or null when nothing was left to apply. Throws BoardOpError when refused;
   * a refused operation changes nothing.
   */
  apply(op: BoardOp, actor: Actor): { seq: number; op: BoardOp; skipped?: string[] } | null {
    const effective = this.check(op, actor);
    if (!effective) return null;
    const seq = this.head.seq + 1;
    this.commit(effective, seq);
    this.head.seq = seq;
    this.headChanged = true;
    const kept = new Set(elementIdsOf(effective));
    const skipped = elementIdsOf(op).filter((id) => !kept.has(id));
    return skipped.length ? { seq, op: effective, skipped } : { seq, op: effective };
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

  /** Validates an operation; returns the part of it that will be applied. */
  private check(op: BoardOp, actor: Actor): BoardOp | null {
    switch (op.type) {
      case 'element.add':
      case 'element.update': {
        // add and update are one rule, Excalidraw's: the write is applied when it is newer
        // than what is stored (live or tombstone: a newer version revives a deleted element).
        const seen = new Set<string>();
        const kept: BoardElement[] = [];
        let bytes = 0;
        let added = 0;
        for (const el of op.elements) {
          if (seen.has(el.id)) throw boardError('invalid', `element ${el.id} appears twice`);
          seen.add(el.id);
          const cur = this.elements.get(el.id);
          this.requireUnlocked(actor, el.id, cur);
          if (el.locked && actor.role !== 'teacher') throw boardError('forbidden', `only the teacher can lock element ${el.id}`);
          if (!isNewer(el, cur)) continue; // a newer version is stored: this write lost
          if (!this.page(el.page_id)) throw boardError('not_found', `page ${el.page_id} does not exist`);
          const b = elementBytes(el);
          if (b > L.bytesPerElement) throw boardError('too_large', `element ${el.id} is larger than ${L.bytesPerElement} bytes`);
          const live = cur && !cur.deleted ? cur : undefined;
          this.requirePinnedPage(actor, live ? [live.page_id, el.page_id] : [el.page_id]);
          bytes += b + textSurcharge(el) - (live?.bytes ?? 0);
          if (!live) added += 1;
          kept.push(el);
        }
        if (!kept.length) return null;
        this.requireRoom(added, bytes);
        return { ...op, elements: kept };
      }
      case 'element.delete': {
        const seen = new Set<string>();
        const kept: Tombstone[] = [];
        for (const t of op.elements) {
          if (seen.has(t.id)) throw boardError('invalid', `element ${t.id} appears twice`);
          seen.add(t.id);
          const cur = this.elements.get(t.id);
          if (!cur) continue; // never existed: nothing to delete
          this.requireUnlocked(actor, t.id, cur);
          // a newer delete of a tombstone raises its version, so the order of two
          // deletes and a revival between them never decides the outcome
          if (!isNewer(t, cur)) continue;
          kept.push(t);
        }
        if (!kept.length) return null;
        this.requirePinnedPage(actor, kept.map((t) => this.elements.get(t.id)!.page_id));
        return { ...op, elements: kept };
      }
      case 'page.add': {
        if (actor.role === 'student' && this.head.pinned_page_id) throw boardError('pinned', 'a page is pinned: students cannot add pages');
        if (this.page(op.page.id)) throw boardError('conflict', `page ${op.page.id} exists already`);
        if (this.head.pages.length >= L.pages) throw boardError('board_full', `a board has at most ${L.pages} pages`);
        if (op.after_page_id && !this.page(op.after_page_id)) throw boardError('not_found', `page ${op.after_page_id} does not exist`);
        return op;
      }
      case 'page.rename': {
        if (!this.page(op.page_id)) throw boardError('not_found', `page ${op.page_id} does not exist`);
        return op;
      }
      case 'page.delete': {
        this.requireTeacher(actor, 'delete pages');
        if (!this.page(op.page_id)) throw boardError('not_found', `page ${op.page_id} does not exist`);
        if (this.head.pages.length === 1) throw boardError('invalid', 'the last page cannot be deleted');
        return op;
      }
      case 'page.reorder': {
        this.requireTeacher(actor, 'reorder pages');
        const current = new Set(this.head.pages.map((p) => p.id));
        const given = new Set(op.page_ids);
        if (given.size !== op.page_ids.length || given.size !== current.size || op.page_ids.some((id) => !current.has(id))) {
          throw boardError('invalid', 'page_ids must list every page of the board exactly once');
        }
        return op;
      }
      case 'page.pin': {
        this.requireTeacher(actor, 'pin pages');
        if (op.page_id && !this.page(op.page_id)) throw boardError('not_found', `page ${op.page_id} does not exist`);
        if (op.page_id === this.head.pinned_page_id) return null;
        return op;
      }
      default: {
        const never: never = op;
        throw boardError('invalid', `unknown operation ${(never as { type: string }).type}`);
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

  private put(el: BoardElement, seq: number): void {
    const prev = this.live(el.id);
    const bytes = elementBytes(el) + textSurcharge(el);
    this.head.live_bytes += bytes - (prev?.bytes ?? 0);
    if (!prev) this.head.live_elements += 1;
    const v = { version: el.version, version_nonce: el.version_nonce };
    this.elements.set(el.id, { page_id: el.page_id, deleted: false, bytes, locked: el.locked, ...v });
    this.writes.set(el.id, { id: el.id, page_id: el.page_id, z: el.z, data: el, bytes, deleted: false, seq, ...v });
    this.head.first_content_seq ??= seq;
  }

  /** Leaves a tombstone with the delete's version: only a newer write brings the element back. */
  private remove(id: string, seq: number, v: { version: number; version_nonce: number }): void {
    const prev = this.elements.get(id);
    if (!prev) return;
    if (!prev.deleted) {
      this.head.live_bytes -= prev.bytes;
      this.head.live_elements -= 1;
    }
    this.elements.set(id, { ...prev, deleted: true, bytes: 0, locked: false, ...v });
    const z = this.writes.get(id)?.z ?? '0';
    this.writes.set(id, { id, page_id: prev.page_id, z, data: null, bytes: 0, deleted: true, seq, ...v });
  }

  private commit(op: BoardOp, seq: number): void {
    const h = this.head;
    switch (op.type) {
      case 'element.add':
      case 'element.update':
        for (const el of op.elements) this.put(el, seq);
        return;
      case 'element.delete':
        for (const t of op.elements) this.remove(t.id, seq, t);
        return;
      case 'page.add': {
        const at = op.after_page_id ? h.pages.findIndex((p) => p.id === op.after_page_id) + 1 : h.pages.length;
        h.pages = [...h.pages.slice(0, at), op.page, ...h.pages.slice(at)];
        return;
      }
      case 'page.rename':
        h.pages = h.pages.map((p) => (p.id === op.page_id ? { ...p, name: op.name } : p));
        return;
      case 'page.delete':
        h.pages = h.pages.filter((p) => p.id !== op.page_id);
        if (h.pinned_page_id === op.page_id) h.pinned_page_id = null;
        // the page's elements get tombstones one version above what they had, so a stale
        // write of one of them cannot bring it back, while its owner's next edit still can
        for (const [id, e] of this.elements) if (e.page_id === op.page_id && !e.deleted) this.remove(id, seq, { version: e.version + 1, version_nonce: e.version_nonce });
        return;
      case 'page.reorder': {
        const byId = new Map(h.pages.map((p) => [p.id, p]));
        h.pages = op.page_ids.map((id) => byId.get(id)!);
        return;
      }
      case 'page.pin':
        h.pinned_page_id = op.page_id;
        return;
    }
  }
}

/** Ids of the elements one operation names. */
export function elementIdsOf(op: BoardOp): string[] {
  return op.type === 'element.add' || op.type === 'element.update' || op.type === 'element.delete' ? op.elements.map((e) => e.id) : [];
}

/** Ids of the elements a batch names (the store loads their state first). */
export function referencedElementIds(ops: BoardOp[]): string[] {
  return [...new Set(ops.flatMap(elementIdsOf))];
}

/** Pages a batch deletes (the store loads their live elements first). */
export function deletedPageIds(ops: BoardOp[]): string[] {
  return ops.flatMap((op) => (op.type === 'page.delete' ? [op.page_id] : []));
}
