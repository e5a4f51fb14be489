import { describe, expect, it } from 'vitest';
import { BoardWork, type BoardHead, type ElementState } from '../../src/board/apply.js';
import { BoardOpError } from '../../src/board/errors.js';
import { BOARD_LIMITS } from '../../src/board/limits.js';
import { isNewer, LiveBoard, partition, reduce, withoutSkipped } from '../../src/board/reducer.js';
import { BoardOpSchema, type BoardElement, type BoardOp } from '../../src/board/schema.js';
import { del, rect, stroke } from './factories.js';

const teacher = { role: 'teacher' as const };
const student = { role: 'student' as const };

/** Stored state of an element for a board loaded in memory. */
const st = (page_id: string, o: Partial<ElementState> = {}): ElementState => ({ page_id, deleted: false, bytes: 100, version: 1, version_nonce: 0, locked: false, ...o });

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

describe('board rules (BoardWork and the shared reducer)', () => {
  it('numbers applied operations 1, 2, 3 in the order they are applied', () => {
    const w = board();
    expect(w.apply({ type: 'element.add', elements: [rect('a')] }, student)?.seq).toBe(1);
    expect(w.apply({ type: 'element.add', elements: [rect('b')] }, student)?.seq).toBe(2);
    expect(w.apply({ type: 'element.delete', elements: [del('a')] }, student)?.seq).toBe(3);
    expect(w.head).toMatchObject({ seq: 3, live_elements: 1, first_content_seq: 1 });
  });

  it('applies an element write only when it is newer: higher version, then the lower nonce on a tie', () => {
    const w = board();
    w.apply({ type: 'element.add', elements: [rect('a', { version: 3, version_nonce: 50 })] }, student);
    // the same write again (a resend after a reconnect) and an older one change nothing
    expect(w.apply({ type: 'element.update', elements: [rect('a', { version: 3, version_nonce: 50, x: 1 })] }, student)).toBeNull();
    expect(w.apply({ type: 'element.add', elements: [rect('a', { version: 2, x: 2 })] }, student)).toBeNull();
    // a tie on the version: the higher nonce loses, the lower wins
    expect(w.apply({ type: 'element.update', elements: [rect('a', { version: 3, version_nonce: 90, x: 3 })] }, student)).toBeNull();
    expect(w.apply({ type: 'element.update', elements: [rect('a', { version: 3, version_nonce: 10, x: 4 })] }, student)?.seq).toBe(2);
    expect(w.apply({ type: 'element.update', elements: [rect('a', { version: 4, version_nonce: 99, x: 5 })] }, student)?.seq).toBe(3);
    expect(w.writes.get('a')).toMatchObject({ version: 4, version_nonce: 99, data: { x: 5 } });
    expect(w.head.live_elements).toBe(1);
  });

  it('keeps a tombstone with the version of the delete, and a later version revives the element (undo of a delete)', () => {
    const w = board();
    w.apply({ type: 'element.add', elements: [rect('a'), rect('b')] }, student);
    w.apply({ type: 'element.delete', elements: [del('a', 2)] }, student);
    expect(w.writes.get('a')).toMatchObject({ deleted: true, data: null, version: 2 });
    expect(w.head.live_elements).toBe(1);
    // an update that was made before the delete (version 2, higher nonce) loses: the delete wins
    const r = w.apply({ type: 'element.update', elements: [rect('a', { version: 2, version_nonce: 5, x: 99 }), rect('b', { version: 2, x: 5 })] }, student);
    expect(r?.op).toEqual({ type: 'element.update', elements: [rect('b', { version: 2, x: 5 })] });
    expect(r?.skipped).toEqual(['a']);
    expect(w.writes.get('a')).toMatchObject({ deleted: true });
    // undo of the delete: the editor brings the element back one version later
    expect(w.apply({ type: 'element.add', elements: [rect('a', { version: 3 })] }, student)?.seq).toBe(4);
    expect(w.writes.get('a')).toMatchObject({ deleted: false, version: 3, data: { x: 10 } });
    expect(w.head.live_elements).toBe(2);
    // a stale delete (older than the revival) is skipped, not an error
    expect(w.apply({ type: 'element.delete', elements: [del('a', 2)] }, student)).toBeNull();
    // a newer delete of a tombstone raises its version (no revival below it)
    w.apply({ type: 'element.delete', elements: [del('b', 3)] }, student);
    expect(w.apply({ type: 'element.delete', elements: [del('b', 6)] }, student)?.seq).toBe(6);
    expect(w.apply({ type: 'element.update', elements: [rect('b', { version: 5 })] }, student)).toBeNull();
    expect(w.writes.get('b')).toMatchObject({ deleted: true, version: 6 });
    expect(w.head.live_elements).toBe(1);
    // deleting what does not exist changes nothing
    expect(w.apply({ type: 'element.delete', elements: [del('nope', 5)] }, student)).toBeNull();
  });

  it('converges like reconcileElements: any order of the same writes leaves the same element', () => {
    // a small seeded generator: the failing case is reproducible
    let seed = 12345;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let round = 0; round < 200; round++) {
      const writes: ({ del: false; el: BoardElement } | { del: true; id: string; version: number; version_nonce: number })[] = [];
      for (let i = 0; i < 5; i++) {
        const version = 1 + rnd(4);
        const version_nonce = rnd(3) * 10 + i + 2; // a (version, nonce) pair names one write, as in the editor
        writes.push(rnd(3) === 0 ? { del: true, id: 'a', version, version_nonce } : { del: false, el: rect('a', { version, version_nonce, x: i }) });
      }
      const finals = [0, 1, 2].map(() => {
        const order = [...writes].sort(() => rnd(3) - 1);
        const w = board();
        // the page's replica reduces what the server committed, in seq order: it must end with the server's element
        const page = new LiveBoard(w.head.pages.map((p) => ({ ...p })));
        const commit = (op: BoardOp) => {
          const r = w.apply(op, student);
          if (r) reduce(page, r.op);
        };
        commit({ type: 'element.add', elements: [rect('a', { version: 1, version_nonce: 1 })] });
        for (const x of order) commit(x.del ? { type: 'element.delete', elements: [{ id: x.id, version: x.version, version_nonce: x.version_nonce }] } : { type: 'element.update', elements: [x.el] });
        const out = w.writes.get('a')!;
        expect(page.elements.get('a') ?? null, `round ${round}: page and server`).toEqual(out.data);
        return JSON.stringify({ deleted: out.deleted, version: out.version, nonce: out.version_nonce, x: out.data?.x });
      });
      expect(new Set(finals).size, `round ${round}: ${finals.join(' / ')}`).toBe(1);
    }
    expect(isNewer({ version: 2, version_nonce: 9 }, { version: 1, version_nonce: 0 })).toBe(true);
    expect(isNewer({ version: 2, version_nonce: 9 }, { version: 2, version_nonce: 9 })).toBe(false);
  });

  it('lets only the teacher change, delete, lock or unlock a locked element', () => {
    const w = board();
    w.apply({ type: 'element.add', elements: [rect('l', { locked: true })] }, teacher);
    expect(refused(() => w.apply({ type: 'element.update', elements: [rect('l', { version: 2, locked: true, x: 500 })] }, student))).toBe('forbidden');
    expect(refused(() => w.apply({ type: 'element.update', elements: [rect('l', { version: 2, locked: false })] }, student))).toBe('forbidden');
    expect(refused(() => w.apply({ type: 'element.delete', elements: [del('l', 9)] }, student))).toBe('forbidden');
    expect(refused(() => w.apply({ type: 'element.add', elements: [rect('mine', { locked: true })] }, student))).toBe('forbidden');
    expect(w.writes.get('l')).toMatchObject({ version: 1, deleted: false, data: { locked: true, x: 10 } });
    // the teacher may move it, unlock it; then students may change it again
    expect(w.apply({ type: 'element.update', elements: [rect('l', { version: 2, locked: true, x: 50 })] }, teacher)?.seq).toBe(2);
    expect(w.apply({ type: 'element.update', elements: [rect('l', { version: 3, locked: false })] }, teacher)?.seq).toBe(3);
    expect(w.apply({ type: 'element.update', elements: [rect('l', { version: 4, x: 7 })] }, student)?.seq).toBe(4);
    // a lock stored before this batch (loaded from Postgres) holds too
    const loaded = board({ live_elements: 1, live_bytes: 100 }, [['k', st('page-1', { locked: true, version: 7 })]]);
    expect(refused(() => loaded.apply({ type: 'element.delete', elements: [del('k', 8)] }, student))).toBe('forbidden');
    expect(loaded.apply({ type: 'element.delete', elements: [del('k', 8)] }, teacher)?.seq).toBe(1);
  });

  it('refuses elements on a page that does not exist', () => {
    expect(refused(() => board().apply({ type: 'element.add', elements: [rect('a', { page_id: 'nope' })] }, student))).toBe('not_found');
  });

  it('keeps students on the pinned page while a page is pinned, but not teachers', () => {
    const w = board({ pinned_page_id: 'page-2' });
    expect(refused(() => w.apply({ type: 'element.add', elements: [rect('a')] }, student))).toBe('pinned');
    expect(w.apply({ type: 'element.add', elements: [rect('b', { page_id: 'page-2' })] }, student)?.seq).toBe(1);
    expect(refused(() => w.apply({ type: 'element.update', elements: [rect('b', { page_id: 'page-1', version: 2 })] }, student))).toBe('pinned');
    expect(refused(() => w.apply({ type: 'page.add', page: { id: 'p3', name: 'x' }, after_page_id: null }, student))).toBe('pinned');
    expect(w.apply({ type: 'element.add', elements: [rect('c')] }, teacher)?.seq).toBe(2);
    expect(refused(() => w.apply({ type: 'element.delete', elements: [del('c')] }, student))).toBe('pinned');
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
    const w = board({ pinned_page_id: 'page-2', live_elements: 1, live_bytes: 100 }, [['old', st('page-2', { version: 4 })]]);
    w.apply({ type: 'element.add', elements: [rect('new', { page_id: 'page-2' }), rect('keep')] }, teacher);
    w.apply({ type: 'page.delete', page_id: 'page-2' }, teacher);
    expect(w.head.pinned_page_id).toBeNull();
    expect(w.head.live_elements).toBe(1);
    expect(w.writes.get('old')).toMatchObject({ deleted: true, version: 5 }); // one above what it had: stale writes stay out
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

  it('gives the page the server\'s board: the page replica reduces committed operations, pages included, to the same state', () => {
    const w = board();
    const page = new LiveBoard(w.head.pages.map((p) => ({ ...p })));
    const ops: BoardOp[] = [
      { type: 'element.add', elements: [rect('a'), rect('b', { page_id: 'page-2' }), rect('c', { page_id: 'page-2' })] },
      { type: 'page.add', page: { id: 'p3', name: 'Three' }, after_page_id: 'page-1' },
      { type: 'page.rename', page_id: 'p3', name: 'Graphs' },
      { type: 'page.pin', page_id: 'page-2' },
      // the teacher's losing write of b is stamped one above the stored version: the page reduces it as applied
      { type: 'element.update', elements: [rect('a', { version: 2, x: 3 }), rect('b', { version: 1, version_nonce: 99, page_id: 'page-2', x: 7 })] },
      { type: 'page.reorder', page_ids: ['page-2', 'p3', 'page-1'] },
      { type: 'page.delete', page_id: 'page-2' },
    ];
    for (const op of ops) {
      const r = w.apply(op, teacher);
      if (r) reduce(page, r.op);
    }
    expect(page.pages).toEqual(w.head.pages);
    expect(page.pinned_page_id).toBe(w.head.pinned_page_id);
    expect([...page.elements.keys()]).toEqual(['a']);
    expect(page.elements.get('a')).toEqual(w.writes.get('a')!.data);
    // the page's elements were tombstoned one version up on the server (b: restamped to 2, then 3)
    expect(w.writes.get('b')).toMatchObject({ deleted: true, version: 3 });
  });

  it('finds the writes that lose in the same pass that keeps the winners (skipped), and the sender drops them', () => {
    const stamps = new Map([['a', { page_id: 'page-1', version: 3, version_nonce: 5 }], ['gone', { page_id: 'page-1', version: 4, version_nonce: 1, deleted: true }]]);
    const op: BoardOp = { type: 'element.update', elements: [rect('a', { version: 3, version_nonce: 9 }), rect('b'), rect('gone', { version: 4, version_nonce: 2 })] };
    const r = partition(op, (id) => stamps.get(id));
    expect(r?.skipped).toEqual(['a', 'gone']);
    expect(r?.op).toEqual({ type: 'element.update', elements: [rect('b')] });
    expect(partition({ type: 'element.delete', elements: [del('never', 9)] }, () => undefined)).toBeNull();
    expect(withoutSkipped(op, ['a', 'gone'])).toEqual(r?.op);
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
