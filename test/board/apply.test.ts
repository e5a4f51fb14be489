import { describe, expect, it } from 'vitest';
import { BoardWork, type BoardHead, type ElementState } from '../../src/board/apply.js';
import { BoardOpError } from '../../src/board/errors.js';
import { BOARD_LIMITS } from '../../src/board/limits.js';
import { BoardOpSchema, type BoardOp } from '../../src/board/schema.js';
import { rect, stroke } from './factories.js';

const teacher = { role: 'teacher' as const };
const student = { role: 'student' as const };

function board(over: Partial<BoardHead> = {}, elements: [string, ElementState][] = []) {
  const head: BoardHead = {
    seq: 0,
    pages: [{ id: 'page-1', name: 'Page 1' }, { id: 'page-2', name: 'Page 2' }],
    pinned_page_id: null,
    live_elements: 0,
    live_bytes: 0,
    first_content_seq: null,
    ...over,
  };
  return new BoardWork(head, new Map(elements));
}

function refused(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof BoardOpError) return err.code;
    throw err;
  }
  throw new Error('operation was not refused');
}

describe('board rules (BoardWork)', () => {
  it('numbers applied operations 1, 2, 3 in the order they are applied', () => {
    const w = board();
    expect(w.apply({ type: 'element.add', elements: [rect('a')] }, student)?.seq).toBe(1);
    expect(w.apply({ type: 'element.add', elements: [rect('b')] }, student)?.seq).toBe(2);
    expect(w.apply({ type: 'element.delete', ids: ['a'] }, student)?.seq).toBe(3);
    expect(w.head).toMatchObject({ seq: 3, live_elements: 1, first_content_seq: 1 });
  });

  it('never reuses an element id, not even a deleted one', () => {
    const w = board({}, [['gone', { page_id: 'page-1', deleted: true, bytes: 0 }]]);
    expect(refused(() => w.apply({ type: 'element.add', elements: [rect('gone')] }, student))).toBe('conflict');
    w.apply({ type: 'element.add', elements: [rect('a')] }, student);
    expect(refused(() => w.apply({ type: 'element.add', elements: [rect('a')] }, student))).toBe('conflict');
  });

  it('lets a delete win over a later update of the same element (the update is dropped, not an error)', () => {
    const w = board();
    w.apply({ type: 'element.add', elements: [rect('a'), rect('b')] }, student);
    w.apply({ type: 'element.delete', ids: ['a'] }, student);
    const r = w.apply({ type: 'element.update', elements: [rect('a', { x: 99 }), rect('b', { x: 5 })] }, student);
    expect(r?.op).toEqual({ type: 'element.update', elements: [rect('b', { x: 5 })] });
    expect(w.apply({ type: 'element.update', elements: [rect('a', { x: 1 })] }, student)).toBeNull();
    expect(w.writes.get('a')).toMatchObject({ deleted: true, data: null });
  });

  it('refuses elements on a page that does not exist', () => {
    expect(refused(() => board().apply({ type: 'element.add', elements: [rect('a', { page_id: 'nope' })] }, student))).toBe('not_found');
  });

  it('keeps students on the pinned page while a page is pinned, but not teachers', () => {
    const w = board({ pinned_page_id: 'page-2' });
    expect(refused(() => w.apply({ type: 'element.add', elements: [rect('a')] }, student))).toBe('pinned');
    expect(w.apply({ type: 'element.add', elements: [rect('b', { page_id: 'page-2' })] }, student)?.seq).toBe(1);
    expect(refused(() => w.apply({ type: 'element.update', elements: [rect('b', { page_id: 'page-1' })] }, student))).toBe('pinned');
    expect(refused(() => w.apply({ type: 'page.add', page: { id: 'p3', name: 'x' }, after_page_id: null }, student))).toBe('pinned');
    expect(w.apply({ type: 'element.add', elements: [rect('c')] }, teacher)?.seq).toBe(2);
    expect(refused(() => w.apply({ type: 'element.delete', ids: ['c'] }, student))).toBe('pinned');
  });

  it('lets only teachers pin, delete and reorder pages', () => {
    const w = board();
    for (const op of [
      { type: 'page.pin', page_id: 'page-2' },
      { type: 'page.reorder', page_ids: ['page-2', 'page-1'] },
      { type: 'page.delete', page_id: 'page-2' },
    ] as BoardOp[]) {
      expect(refused(() => w.apply(op, student))).toBe('forbidden');
      expect(w.apply(op, teacher)).not.toBeNull();
    }
  });

  it('adds pages after a given page, renames them, and refuses to delete the last page', () => {
    const w = board();
    w.apply({ type: 'page.add', page: { id: 'mid', name: 'Middle' }, after_page_id: 'page-1' }, student);
    w.apply({ type: 'page.rename', page_id: 'mid', name: 'Graphs' }, student);
    expect(w.head.pages.map((p) => p.name)).toEqual(['Page 1', 'Graphs', 'Page 2']);
    expect(refused(() => w.apply({ type: 'page.add', page: { id: 'mid', name: 'again' }, after_page_id: null }, student))).toBe('conflict');
    w.apply({ type: 'page.delete', page_id: 'page-1' }, teacher);
    w.apply({ type: 'page.delete', page_id: 'page-2' }, teacher);
    expect(refused(() => w.apply({ type: 'page.delete', page_id: 'mid' }, teacher))).toBe('invalid');
  });

  it('deleting a page deletes its elements and unpins it', () => {
    const w = board({ pinned_page_id: 'page-2', live_elements: 1, live_bytes: 100 }, [['old', { page_id: 'page-2', deleted: false, bytes: 100 }]]);
    w.apply({ type: 'element.add', elements: [rect('new', { page_id: 'page-2' }), rect('keep')] }, teacher);
    w.apply({ type: 'page.delete', page_id: 'page-2' }, teacher);
    expect(w.head.pinned_page_id).toBeNull();
    expect(w.head.live_elements).toBe(1);
    expect(w.writes.get('old')).toMatchObject({ deleted: true });
    expect(w.writes.get('new')).toMatchObject({ deleted: true });
    expect(w.writes.get('keep')).toMatchObject({ deleted: false });
  });

  it('requires a reorder to list every page exactly once', () => {
    const w = board();
    expect(refused(() => w.apply({ type: 'page.reorder', page_ids: ['page-1'] }, teacher))).toBe('invalid');
    expect(refused(() => w.apply({ type: 'page.reorder', page_ids: ['page-1', 'page-1'] }, teacher))).toBe('invalid');
  });

  it('refuses an operation that would exceed the board limits, and applies nothing of it', () => {
    const w = board({ live_elements: BOARD_LIMITS.elementsPerBoard - 1 });
    expect(refused(() => w.apply({ type: 'element.add', elements: [rect('a'), rect('b')] }, student))).toBe('board_full');
    expect(w.head.seq).toBe(0);
    expect(w.writes.size).toBe(0);
    const full = board({ live_bytes: BOARD_LIMITS.bytesPerBoard - 10 });
    expect(refused(() => full.apply({ type: 'element.add', elements: [rect('a')] }, student))).toBe('board_full');
    const pages = board({ pages: Array.from({ length: BOARD_LIMITS.pages }, (_, i) => ({ id: `p${i}`, name: 'p' })) });
    expect(refused(() => pages.apply({ type: 'page.add', page: { id: 'x', name: 'x' }, after_page_id: null }, teacher))).toBe('board_full');
  });

  it('validates operations with one schema per type: size limits, unknown fields, bad values', () => {
    const ok = BoardOpSchema.safeParse({ type: 'element.add', elements: [stroke('s')] });
    expect(ok.success).toBe(true);
    const cases: unknown[] = [
      { type: 'element.add', elements: [] },
      { type: 'element.add', elements: Array.from({ length: BOARD_LIMITS.elementsPerOp + 1 }, (_, i) => rect(`r${i}`)) },
      { type: 'element.add', elements: [stroke('s', BOARD_LIMITS.freehandPoints + 1)] },
      { type: 'element.add', elements: [{ ...rect('a'), x: Number.NaN }] },
      { type: 'element.add', elements: [{ ...rect('a'), x: 1e9 }] },
      { type: 'element.add', elements: [{ ...rect('a'), onclick: 'x' }] },
      { type: 'element.add', elements: [{ ...rect('a'), style: { stroke: 'red' } }] },
      { type: 'element.add', elements: [{ ...rect('a'), id: 'has space' }] },
      { type: 'element.add', elements: [{ ...rect('a'), type: 'image' }] },
      { type: 'page.rename', page_id: 'page-1', name: 'n'.repeat(61) },
      { type: 'page.rename', page_id: 'page-1', name: '   ' },
      { type: 'element.explode' },
      'not an object',
    ];
    for (const c of cases) expect(BoardOpSchema.safeParse(c).success, JSON.stringify(c).slice(0, 80)).toBe(false);
  });
});
