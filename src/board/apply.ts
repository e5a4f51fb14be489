import { boardError } from './errors.js';
import { BOARD_LIMITS as L, textSurcharge } from './limits.js';
import type { BoardElement, BoardOp, BoardPage } from './schema.js';

/** Who sends an operation: the rules differ for teachers and students. */
export interface Actor {
  role: 'teacher' | 'student';
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
  apply(op: BoardOp, actor: Actor): { seq: number; op: BoardOp } | null {
    const effective = this.check(op, actor);
    if (!effective) return null;
    const seq = this.head.seq + 1;
    this.commit(effective, seq);
    this.head.seq = seq;
    this.headChanged = true;
    return { seq, op: effective };
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
      case 'element.add': {
        const seen = new Set<string>();
        let bytes = 0;
        for (const el of op.elements) {
          if (seen.has(el.id)) throw boardError('invalid', `element ${el.id} appears twice`);
          seen.add(el.id);
          if (this.elements.has(el.id)) throw boardError('conflict', `element ${el.id} exists already`);
          if (!this.page(el.page_id)) throw boardError('not_found', `page ${el.page_id} does not exist`);
          const b = elementBytes(el);
          if (b > L.bytesPerElement) throw boardError('too_large', `element ${el.id} is larger than ${L.bytesPerElement} bytes`);
          bytes += b + textSurcharge(el);
        }
        this.requirePinnedPage(actor, op.elements.map((e) => e.page_id));
        this.requireRoom(op.elements.length, bytes);
        return op;
      }
      case 'element.update': {
        const seen = new Set<string>();
        const kept: BoardElement[] = [];
        let bytes = 0;
        for (const el of op.elements) {
          if (seen.has(el.id)) throw boardError('invalid', `element ${el.id} appears twice`);
          seen.add(el.id);
          const cur = this.live(el.id);
          if (!cur) continue; // deleted meanwhile by someone else: the delete wins
          if (!this.page(el.page_id)) throw boardError('not_found', `page ${el.page_id} does not exist`);
          const b = elementBytes(el);
          if (b > L.bytesPerElement) throw boardError('too_large', `element ${el.id} is larger than ${L.bytesPerElement} bytes`);
          this.requirePinnedPage(actor, [cur.page_id, el.page_id]);
          bytes += b + textSurcharge(el) - cur.bytes;
          kept.push(el);
        }
        if (!kept.length) return null;
        this.requireRoom(0, bytes);
        return { ...op, elements: kept };
      }
      case 'element.delete': {
        const ids = [...new Set(op.ids)].filter((id) => this.live(id));
        if (!ids.length) return null;
        this.requirePinnedPage(actor, ids.map((id) => this.live(id)!.page_id));
        return { ...op, ids };
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
    this.elements.set(el.id, { page_id: el.page_id, deleted: false, bytes });
    this.writes.set(el.id, { id: el.id, page_id: el.page_id, z: el.z, data: el, bytes, deleted: false, seq });
    this.head.first_content_seq ??= seq;
  }

  private remove(id: string, seq: number): void {
    const prev = this.live(id);
    if (!prev) return;
    this.head.live_bytes -= prev.bytes;
    this.head.live_elements -= 1;
    this.elements.set(id, { ...prev, deleted: true, bytes: 0 });
    const z = this.writes.get(id)?.z ?? '0';
    this.writes.set(id, { id, page_id: prev.page_id, z, data: null, bytes: 0, deleted: true, seq });
  }

  private commit(op: BoardOp, seq: number): void {
    const h = this.head;
    switch (op.type) {
      case 'element.add':
      case 'element.update':
        for (const el of op.elements) this.put(el, seq);
        return;
      case 'element.delete':
        for (const id of op.ids) this.remove(id, seq);
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
        for (const [id, e] of this.elements) if (e.page_id === op.page_id && !e.deleted) this.remove(id, seq);
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

/** Ids of the elements a batch names (the store loads their state first). */
export function referencedElementIds(ops: BoardOp[]): string[] {
  const ids = new Set<string>();
  for (const op of ops) {
    if (op.type === 'element.add' || op.type === 'element.update') for (const e of op.elements) ids.add(e.id);
    else if (op.type === 'element.delete') for (const id of op.ids) ids.add(id);
  }
  return [...ids];
}

/** Pages a batch deletes (the store loads their live elements first). */
export function deletedPageIds(ops: BoardOp[]): string[] {
  return ops.flatMap((op) => (op.type === 'page.delete' ? [op.page_id] : []));
}
