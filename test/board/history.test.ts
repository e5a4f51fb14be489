import { describe, expect, it } from 'vitest';
import { boardAt } from '../../src/board/history.js';
import type { BoardElement, BoardOp } from '../../src/board/schema.js';
import { boardHistory, toSnapshot } from '../../src/board/store.js';
import type { Actor } from '../../src/board/apply.js';
import { suiteOrFull } from '../helpers/length.js';
import { rect, stroke } from './factories.js';
import { newLesson, startNode } from './helpers.js';
import { rng } from './random.js';
import { ReplayTimeline, type ReplayEntry } from '../../web/src/replay/player.js';

/**
 * The board's history: every committed operation is appended in its commit's transaction, and
 * the board rebuilt from it at its last operation equals the snapshot, element for element,
 * after random sessions of a teacher and a student on two gateway nodes (concurrent edits,
 * undo and redo of deletes, page deletes, pins).
 */
const nodeA = startNode();
const nodeB = startNode();
const teacher: Actor = { role: 'teacher', person_id: 'p-teacher' };
const student: Actor = { role: 'student', person_id: 'p-student' };

/** What one person believes the board holds (stale when the other changed it meanwhile, as on a real screen). */
interface View {
  els: Map<string, BoardElement>;
  gone: Map<string, BoardElement>;
  pages: string[];
}

/** One random operation a person would send from what they see. */
function nextOp(r: () => number, v: View, who: 'teacher' | 'student', n: number): BoardOp | null {
  const pick = <T>(xs: T[]): T | undefined => (xs.length ? xs[Math.floor(r() * xs.length)] : undefined);
  const nonce = () => Math.floor(r() * 2 ** 31) - 2 ** 30;
  const live = [...v.els.values()];
  const kinds = who === 'teacher' ? ['add', 'add', 'move', 'delete', 'undo', 'redo', 'page', 'pagedel', 'pin', 'unpin', 'reorder'] : ['add', 'add', 'add', 'move', 'delete', 'undo', 'redo', 'page'];
  switch (pick(kinds)) {
    case 'add': {
      const page = pick(v.pages) ?? 'page-1';
      const id = `${who[0]}${n}`;
      const z = `a${n.toString(36).padStart(3, '0')}`;
      const el = r() < 0.5 ? rect(id, { page_id: page, z, x: Math.floor(r() * 800), y: Math.floor(r() * 600) }) : stroke(id, 5 + Math.floor(r() * 40), { page_id: page, z, x: Math.floor(r() * 800) });
      return { type: 'element.add', elements: [el] };
    }
    case 'move': {
      const el = pick(live);
      return el ? { type: 'element.update', elements: [{ ...el, x: el.x + 7, version: el.version + 1, version_nonce: nonce() }] } : null;
    }
    case 'delete':
    case 'redo': {
      const el = pick(live);
      return el ? { type: 'element.delete', elements: [{ id: el.id, version: el.version + 1, version_nonce: nonce() }] } : null;
    }
    case 'undo': {
      // undo of a delete: the element as it was, one version above its tombstone
      const el = pick([...v.gone.values()]);
      return el ? { type: 'element.update', elements: [{ ...el, version: el.version + 2, version_nonce: nonce() }] } : null;
    }
    case 'page':
      return { type: 'page.add', page: { id: `pg-${who[0]}${n}`, name: `Page ${n}` }, after_page_id: pick(v.pages) ?? null };
    case 'pagedel': {
      const page = v.pages.length > 1 ? pick(v.pages.slice(1)) : undefined;
      return page ? { type: 'page.delete', page_id: page } : null;
    }
    case 'pin':
      return { type: 'page.pin', page_id: pick(v.pages) ?? null };
    case 'unpin':
      return { type: 'page.pin', page_id: null };
    case 'reorder':
      return { type: 'page.reorder', page_ids: [...v.pages].reverse() };
    default:
      return null;
  }
}

/** Reads the board into a person's view (what their page would show after a sync). */
async function look(lessonId: string, v: View): Promise<void> {
  const read = await nodeA.board.read(lessonId);
  const now = new Map(read.elements.map((e) => [e.id, e]));
  for (const [id, el] of v.els) if (!now.has(id)) v.gone.set(id, el);
  for (const id of now.keys()) v.gone.delete(id);
  v.els = now;
  v.pages = read.head.pages.map((p) => p.id);
}

async function randomSession(seed: number, rounds: number): Promise<string> {
  const lesson = await newLesson(nodeA.deps.sql);
  const r = rng(seed);
  const views = { teacher: { els: new Map(), gone: new Map(), pages: ['page-1'] } as View, student: { els: new Map(), gone: new Map(), pages: ['page-1'] } as View };
  let n = 0;
  for (let round = 0; round < rounds; round++) {
    // both people send at once, through different nodes: Postgres orders them
    const sends: Promise<unknown>[] = [];
    for (const [who, node, actor] of [['teacher', nodeA, teacher], ['student', nodeB, student]] as const) {
      for (let k = 1 + Math.floor(r() * 3); k > 0; k--) {
        const op = nextOp(r, views[who], who, n++);
        if (op) sends.push(node.board.submit(lesson.id, op, actor).catch(() => undefined)); // refusals are part of a session
      }
    }
    await Promise.all(sends);
    // each person sees the board again now and then (a stale view makes conflicting writes)
    for (const who of ['teacher', 'student'] as const) if (r() < 0.6) await look(lesson.id, views[who]);
  }
  return lesson.id;
}

async function history(lessonId: string) {
  return boardHistory(nodeA.deps.sql, lessonId, 0, 1_000_000);
}

describe('board history', () => {
  it('appends each committed operation with its seq, time and author; refused operations and updates that lost leave nothing', async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('r1')] }, teacher);
    await nodeB.board.submit(lesson.id, { type: 'element.update', elements: [rect('r1', { x: 50, version: 2 })] }, student);
    await expect(nodeB.board.submit(lesson.id, { type: 'page.pin', page_id: 'page-1' }, student)).rejects.toThrow();
    // an update that loses entirely is not applied, so it is not history either
    await nodeB.board.submit(lesson.id, { type: 'element.update', elements: [rect('r1', { x: 1, version: 2, version_nonce: 5 })] }, student);
    const h = await history(lesson.id);
    expect(h.map((e) => [e.seq, e.person_id, e.role, e.op.type])).toEqual([
      [1, 'p-teacher', 'teacher', 'element.add'],
      [2, 'p-student', 'student', 'element.update'],
    ]);
    expect(new Date(h[0].at).getTime()).toBeGreaterThan(0);
    // paginated by seq
    expect((await boardHistory(nodeA.deps.sql, lesson.id, 1, 10)).map((e) => e.seq)).toEqual([2]);
  });

  it.each(suiteOrFull([[1], [2]], [[1], [2], [3], [4], [5], [6], [7], [8]]))('rebuilt at its last operation equals the snapshot after a random two-node session (seed %i)', async (seed) => {
    const lessonId = await randomSession(seed, suiteOrFull(25, 120));
    const snap = toSnapshot(lessonId, await nodeA.board.read(lessonId));
    const h = await history(lessonId);
    // every seq of the board is in the history, once, in order
    expect(h.map((e) => e.seq)).toEqual(Array.from({ length: snap.seq }, (_, i) => i + 1));
    // the session did what it is meant to cover: deletes and their undo (a revival), page deletes, pins
    const kinds = new Set(h.map((e) => e.op.type));
    expect([...kinds].sort()).toEqual(expect.arrayContaining(['element.add', 'element.delete', 'element.update', 'page.add', 'page.delete', 'page.pin']));
    const deleted = new Set(h.flatMap((e) => (e.op.type === 'element.delete' ? e.op.elements.map((t) => t.id) : [])));
    expect(h.some((e) => e.op.type === 'element.update' && e.op.elements.some((el) => deleted.has(el.id) && h.some((d) => d.seq < e.seq && d.op.type === 'element.delete' && d.op.elements.some((t) => t.id === el.id))))).toBe(true);
    const rebuilt = boardAt(h);
    expect(rebuilt.seq).toBe(snap.seq);
    expect(rebuilt.pages).toEqual(snap.pages);
    expect(rebuilt.pinned_page_id).toBe(snap.pinned_page_id);
    expect(new Map(rebuilt.elements.map((e) => [e.id, e]))).toEqual(new Map(snap.elements.map((e) => [e.id, e])));
    // element for element, in the same order per page (z, as the snapshot stacks them)
    const order = (els: BoardElement[]) => els.map((e) => `${e.page_id}/${e.z}/${e.id}`).sort();
    expect(order(rebuilt.elements)).toEqual(order(snap.elements));
  });

  it("the replay's timeline: the seq at a moment, and the page shown following the history (an element's page, an added page, back to the first when the page goes)", () => {
    const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 10, 0, s)).toISOString();
    const e = (seq: number, s: number, op: BoardOp): ReplayEntry => ({ seq, at: at(s), person: null, person_id: null, role: 'teacher', op });
    const entries = [
      e(1, 10, { type: 'element.add', elements: [rect('a')] }),
      e(2, 20, { type: 'page.add', page: { id: 'p2', name: 'Page 2' }, after_page_id: null }),
      e(3, 30, { type: 'element.add', elements: [rect('b', { page_id: 'p2' })] }),
      e(4, 40, { type: 'page.rename', page_id: 'p2', name: 'Two' }),
      e(5, 50, { type: 'element.update', elements: [rect('a', { version: 2 })] }),
      e(6, 60, { type: 'element.delete', elements: [{ id: 'b', version: 2, version_nonce: 0 }] }),
      e(7, 70, { type: 'page.delete', page_id: 'p2' }),
    ];
    const t = new ReplayTimeline(entries, [{ from: Date.parse(at(0)), to: Date.parse(at(90)) }]);
    expect([t.start, t.end]).toEqual([Date.parse(at(0)), Date.parse(at(90))]);
    expect([5, 10, 19, 20, 69, 70, 90].map((s) => t.seqAt(Date.parse(at(s))))).toEqual([0, 1, 1, 2, 6, 7, 7]);
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((seq) => t.pageAt(seq))).toEqual(['page-1', 'page-1', 'p2', 'p2', 'p2', 'page-1', 'p2', 'page-1']);
  });
});
