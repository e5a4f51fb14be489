import { describe, expect, it } from 'vitest';
import { BoardOpError } from '../../src/board/errors.js';
import { BoardService } from '../../realtime/features/board/service.js';
import { BoardStore } from '../../src/board/store.js';
import { ManualClock } from '../../src/lib/clock.js';
import { del, rect, stroke, text } from './factories.js';
import { newLesson, recorder, startNode, throughReads, until } from './helpers.js';

const teacher = { role: 'teacher' as const };
const student = { role: 'student' as const };

const nodeA = startNode({ gapMs: 300 });
const nodeB = startNode({ gapMs: 300 });

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof BoardOpError) return err.code;
    throw err;
  }
  throw new Error('not refused');
}

describe('BoardService on two nodes sharing Postgres and Redis', () => {
  it('stores a label\'s container_id, and refuses one naming a stored shape on another page (the store loads it)', async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    await nodeA.board.submit(lesson.id, { type: 'page.add', page: { id: 'p2', name: 'Page 2' }, after_page_id: null }, teacher);
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('r1'), rect('r2', { page_id: 'p2' })] }, teacher);
    // the shape is stored, not in the operation: only the store's load lets the rule see its page
    expect(await refusal(nodeB.board.submit(lesson.id, { type: 'element.add', elements: [text('t2', 'Label', { container_id: 'r2' })] }, student))).toBe('invalid');
    const ok = await nodeB.board.submit(lesson.id, { type: 'element.add', elements: [text('t1', 'Label', { container_id: 'r1' }), text('t3', 'Gone', { container_id: 'nowhere' })] }, student);
    expect(ok.seq).toBe(3);
    const read = await nodeA.board.read(lesson.id);
    expect(read.elements.find((e) => e.id === 't1')).toMatchObject({ container_id: 'r1' });
    expect(read.elements.find((e) => e.id === 't3')).toMatchObject({ container_id: 'nowhere' });
    expect(read.elements.map((e) => e.id).sort()).toEqual(['r1', 'r2', 't1', 't3']);
  });

  it('orders concurrent operations from two nodes into one gapless sequence that both nodes relay identically', async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    const onA = recorder();
    const onB = recorder();
    await nodeA.join(lesson.id, onA.listener);
    await nodeB.join(lesson.id, onB.listener);
    const acks = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        (i % 2 ? nodeA : nodeB).board.submit(lesson.id, { type: 'element.add', elements: [stroke(`s${i}`, 10, { z: `a${i}` })] }, student, `c${i}`),
      ),
    );
    const seqs = acks.map((a) => a.seq!).sort((x, y) => x - y);
    expect(seqs).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    await until(() => onA.seqs.length === 60 && onB.seqs.length === 60);
    expect(onA.seqs).toEqual(seqs);
    expect(onB.seqs).toEqual(seqs);
    // the relayed op carries its sender's connection id, so the gateway acks instead of echoing
    const first = onB.ops.find((o) => o.seq === acks[7].seq)!;
    expect(first.origin).toBe('c7');
    expect(JSON.stringify(onA.ops)).toBe(JSON.stringify(onB.ops));
    const read = await nodeB.board.read(lesson.id);
    expect(read.head.seq).toBe(60);
    expect(read.elements).toHaveLength(60);
  });

  it('starts the feeds of a class of lessons opening at once from one read of their seqs, each at its own board\'s seq', async () => {
    const lessons = await Promise.all(Array.from({ length: 12 }, () => newLesson(nodeA.deps.sql)));
    // half the boards written (1 to 6 operations), half never
    for (const [i, l] of lessons.slice(0, 6).entries()) {
      for (let k = 0; k <= i; k++) await nodeA.board.submit(l.id, { type: 'element.add', elements: [rect(`r${k}`)] }, student);
    }
    // a node whose read pool counts the statements sent through it
    let statements = 0;
    const reads = throughReads(nodeA.deps.readSql, () => void statements++);
    const node = new BoardService({ ...nodeA.deps, readSql: reads }, { previewDebounceMs: 60_000 });
    const joined = await Promise.all(lessons.map((l) => node.join(l.id, recorder().listener)));
    expect(joined.map((j) => j.seq)).toEqual([1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0]);
    expect(statements).toBe(1);
    for (const j of joined) j.leave();
    await node.close();
  });

  it("holds what a feed hears while the board's seq cannot be read, then relays in order from where the board stands", async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    let failures = 1;
    const flaky = throughReads(nodeB.deps.readSql, () => {
      if (failures-- > 0) throw new Error('connection terminated');
    });
    // a gap time longer than the test: the second read is the one asked for below
    const node = new BoardService({ ...nodeB.deps, readSql: flaky }, { previewDebounceMs: 60_000, gapMs: 60_000 });
    const on = recorder();
    const sub = node.listen(lesson.id, on.listener);
    await expect(sub.started()).rejects.toThrow('connection terminated');
    // heard from the relay while the feed does not know where the board stands: held
    node.received(lesson.id, [{ seq: 2, op: { type: 'element.add', elements: [rect('b')] } } as never]);
    expect(on.seqs).toEqual([]);
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('a')] }, student);
    // the board stands at 1 (in the store, not relayed to this listener); 2 follows it at once
    expect(await sub.started()).toBe(2);
    expect(on.seqs).toEqual([2]);
    sub.leave();
    await node.close();
  });

  it('retries a failed start of its own, without a caller asking', async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    let reads = 0;
    const flaky = throughReads(nodeB.deps.readSql, () => {
      if (reads++ === 0) throw new Error('connection terminated');
    });
    const node = new BoardService({ ...nodeB.deps, readSql: flaky }, { previewDebounceMs: 60_000, gapMs: 100 });
    const sub = node.listen(lesson.id, recorder().listener);
    await until(() => reads === 2);
    expect(await sub.started()).toBe(0);
    expect(reads).toBe(2);
    sub.leave();
    await node.close();
  });

  it('keeps every acknowledged operation after the node restarts, and a board reused a week later starts where it stopped', async () => {
    const clock = new ManualClock();
    const node = startNode({}, clock);
    const lesson = await newLesson(node.deps.sql);
    await node.board.submit(lesson.id, { type: 'element.add', elements: [rect('r1'), text('t1', 'Newton')] }, student);
    await node.board.submit(lesson.id, { type: 'page.add', page: { id: 'p2', name: 'Homework' }, after_page_id: null }, teacher);
    await node.board.submit(lesson.id, { type: 'page.pin', page_id: 'p2' }, teacher);
    await node.close();

    clock.advance(7 * 24 * 3600 * 1000);
    const later = startNode({}, clock);
    const read = await later.board.read(lesson.id);
    expect(read.head).toMatchObject({ seq: 3, pinned_page_id: 'p2', pages: [{ id: 'page-1', name: 'Page 1' }, { id: 'p2', name: 'Homework' }] });
    expect(read.elements.map((e) => e.id)).toEqual(['r1', 't1']);
    const ack = await later.board.submit(lesson.id, { type: 'element.add', elements: [rect('r2', { page_id: 'p2' })] }, student);
    expect(ack.seq).toBe(4);
    await later.close();
  });

  it('refuses malformed, oversized and rule-breaking operations with a code, and changes nothing', async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('a')] }, student);
    expect(await refusal(nodeA.board.submit(lesson.id, { type: 'element.add', elements: [{ id: 'x' }] }, student))).toBe('invalid');
    expect(await refusal(nodeA.board.submit(lesson.id, { type: 'nonsense' }, student))).toBe('invalid');
    expect(await refusal(nodeA.board.submit(lesson.id, { type: 'element.add', elements: [stroke('big', 5000)] }, student))).toBe('too_large');
    expect(await refusal(nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('lk', { locked: true })] }, student))).toBe('forbidden');
    expect(await refusal(nodeA.board.submit(lesson.id, { type: 'page.pin', page_id: 'page-1' }, student))).toBe('forbidden');
    const read = await nodeA.board.read(lesson.id);
    expect(read.head.seq).toBe(1);
    expect(read.elements).toEqual([rect('a')]);
  });

  it('refuses operations on an archived lesson', async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('a')] }, student);
    await nodeA.deps.sql`UPDATE lessons SET archived_at = now() WHERE id = ${lesson.id}`;
    expect(await refusal(nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('b')] }, student))).toBe('archived');
  });

  it('tells a reconnecting client only what changed after its seq, deletions included', async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('a'), rect('b', { z: 'a1' })] }, student);
    const since = (await nodeA.board.read(lesson.id)).head.seq;
    await nodeB.board.submit(lesson.id, { type: 'element.update', elements: [rect('a', { x: 500, version: 2 })] }, student);
    await nodeB.board.submit(lesson.id, { type: 'element.delete', elements: [del('b')] }, student);
    await nodeB.board.submit(lesson.id, { type: 'element.add', elements: [rect('c', { z: 'a2' })] }, student);
    const delta = await nodeA.board.read(lesson.id, since);
    expect(delta.full).toBe(false);
    expect(delta.head.seq).toBe(since + 3);
    expect(delta.elements.map((e) => [e.id, e.x])).toEqual([['a', 500], ['c', 10]]);
    expect(delta.deleted_ids).toEqual(['b']);
    const full = await nodeA.board.read(lesson.id, 0);
    expect(full.full).toBe(true);
    expect(full.elements.map((e) => e.id)).toEqual(['a', 'c']);
  });

  it('stores versions and tombstones in Postgres: a newer write revives, a stale one from another node loses, a lock holds', async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    const t = { role: 'teacher' as const };
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('a'), rect('lk', { locked: true, z: 'a1' })] }, t);
    await nodeA.board.submit(lesson.id, { type: 'element.delete', elements: [del('a', 2, 7)] }, student);
    const [tomb] = await nodeA.deps.sql`SELECT deleted, version, version_nonce, data FROM board_elements WHERE lesson_id = ${lesson.id} AND element_id = 'a'`;
    expect(tomb).toMatchObject({ deleted: true, version: 2, version_nonce: 7, data: null });
    // node B (its own pool) sends an edit made before the delete: it loses to the tombstone
    expect((await nodeB.board.submit(lesson.id, { type: 'element.update', elements: [rect('a', { version: 2, version_nonce: 9, x: 1 })] }, student)).seq).toBeNull();
    // undo of the delete: one version later, the element is back with its data
    expect((await nodeB.board.submit(lesson.id, { type: 'element.add', elements: [rect('a', { version: 3, version_nonce: 1 })] }, student)).seq).toBe(3);
    // a student cannot move the teacher's locked element, even through another node
    expect(await refusal(nodeB.board.submit(lesson.id, { type: 'element.update', elements: [rect('lk', { version: 5, z: 'a1', x: 900 })] }, student))).toBe('forbidden');
    const snap = await nodeA.board.read(lesson.id);
    expect(snap.head).toMatchObject({ seq: 3, live_elements: 2 });
    expect(snap.elements.map((e) => [e.id, e.version, e.x])).toEqual([['a', 3, 10], ['lk', 1, 10]]);
  });

  it('a node that never receives a relayed batch tells its listeners to resync within the gap time', async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    const onB = recorder();
    await nodeB.join(lesson.id, onB.listener);
    // A commit that no node relays (as if its node died between commit and publish)...
    const [r] = await new BoardStore(nodeA.deps.sql).commitBatch(lesson.id, [{ op: { type: 'element.add', elements: [rect('lost')] }, actor: student }], new Date());
    expect(r).toMatchObject({ ok: true, seq: 1 });
    // ...then a normal one: B sees seq 2 without seq 1, waits, then resets instead of delivering out of order.
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('next')] }, student);
    await until(() => onB.resets.length === 1, 3000);
    expect(onB.resets).toEqual([2]);
    expect(onB.seqs).toEqual([]);
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('after')] }, student);
    await until(() => onB.seqs.length === 1);
    expect(onB.seqs).toEqual([3]);
  });

  it('stops relaying to a listener that left', async () => {
    const lesson = await newLesson(nodeA.deps.sql);
    const onB = recorder();
    const sub = await nodeB.join(lesson.id, onB.listener);
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('a')] }, student);
    await until(() => onB.seqs.length === 1);
    // Another lesson's commit, made after 'b', travels from node A to node B on the same two Redis
    // connections (one publisher, one subscriber, one Redis): once node B relays it, 'b' was heard first.
    const other = await newLesson(nodeA.deps.sql);
    const onOther = recorder();
    await nodeB.join(other.id, onOther.listener);
    sub.leave();
    await nodeA.board.submit(lesson.id, { type: 'element.add', elements: [rect('b')] }, student);
    await nodeA.board.submit(other.id, { type: 'element.add', elements: [rect('later')] }, student);
    await until(() => onOther.seqs.length === 1);
    expect(onB.seqs).toEqual([1]);
  });
});

describe('group commit across lessons (BoardStore.commitLessons, BoardCommitter)', () => {
  it('commits the batches of several lessons in one transaction, each in its own order, a deleted or unknown lesson refused alone', async () => {
    const [l1, l2, gone] = await Promise.all([newLesson(nodeA.deps.sql), newLesson(nodeA.deps.sql), newLesson(nodeA.deps.sql)]);
    await nodeA.deps.sql`UPDATE lessons SET archived_at = now() WHERE id = ${gone.id}`;
    const store = new BoardStore(nodeA.deps.sql);
    const add = (id: string) => ({ op: { type: 'element.add' as const, elements: [rect(id)] }, actor: student });
    const out = await store.commitLessons(
      [
        { lessonId: l1.id, items: [add('a'), add('b'), add('a')] },
        { lessonId: gone.id, items: [add('x')] },
        { lessonId: 'lsn_does_not_exist', items: [add('y')] },
        { lessonId: l2.id, items: [add('a')] },
      ],
      new Date(),
    );
    // the same write of 'a' again is older-or-equal: skipped (seq null), not an error
    expect(out.get(l1.id)!.map((r) => (r.ok ? r.seq : r.error.code))).toEqual([1, 2, null]);
    expect(out.get(l2.id)!.map((r) => (r.ok ? r.seq : r.error.code))).toEqual([1]);
    expect(out.get(gone.id)!.map((r) => (r.ok ? r.seq : r.error.code))).toEqual(['archived']);
    expect(out.get('lsn_does_not_exist')!.map((r) => (r.ok ? r.seq : r.error.code))).toEqual(['not_found']);
    expect((await store.read(l1.id)).elements.map((e) => e.id)).toEqual(['a', 'b']);
    expect((await store.read(l2.id)).head.seq).toBe(1);
  });

  it('puts the operations of many quiet lessons into far fewer transactions than operations, every lesson gapless', async () => {
    const board = new BoardService(nodeA.deps, { maxLessons: 64, commitConcurrency: 2, previewDebounceMs: 60_000 });
    const lessons = await Promise.all(Array.from({ length: 60 }, () => newLesson(nodeA.deps.sql)));
    const acks = await Promise.all(lessons.flatMap((l) => [0, 1, 2].map((k) => board.submit(l.id, { type: 'element.add', elements: [rect(`e${k}`)] }, student)))).finally(() => board.close());
    for (let i = 0; i < lessons.length; i++) expect(acks.slice(i * 3, i * 3 + 3).map((a) => a.seq).sort()).toEqual([1, 2, 3]);
    // Every element row was inserted by the transaction that committed its operation (its xmin), so the
    // distinct xmins are exactly the transactions used. (Not pg_stat_database: a backend reports its
    // counts up to 10 s late, so earlier statements of this file would land in the window.)
    const [{ n }] = await nodeA.deps.sql<{ n: number }[]>`
      SELECT count(DISTINCT xmin::text)::int AS n FROM board_elements WHERE lesson_id = ANY(${lessons.map((l) => l.id)}::text[])`;
    // 180 operations of 60 lessons: the first two alone (both slots free), then the waiting ones together
    expect(n).toBeGreaterThanOrEqual(2);
    expect(n).toBeLessThan(10);
  });
});

describe('background previews', () => {
  it('renders the lessons left at once one after the other until all are current, and close() renders what is still pending', async () => {
    const node = startNode({ previewDebounceMs: 60_000 });
    const lessons = await Promise.all(Array.from({ length: 6 }, () => newLesson(node.deps.sql)));
    for (const l of lessons) await node.board.submit(l.id, { type: 'element.add', elements: [rect('a'), stroke('b')] }, student);
    const previewSeqs = async () => {
      // nodeA's pool: `node` closes its own below
      const rows = await nodeA.deps.sql<{ lesson_id: string; seq: number }[]>`SELECT lesson_id, seq FROM board_previews WHERE lesson_id = ANY(${lessons.map((l) => l.id)}::text[])`;
      return lessons.map((l) => Number(rows.find((r) => r.lesson_id === l.id)?.seq ?? 0));
    };
    expect(await previewSeqs()).toEqual([0, 0, 0, 0, 0, 0]); // the debounce is a minute
    for (const l of lessons.slice(0, 4)) node.board.lessonLeft(l.id);
    await until(async () => (await previewSeqs()).slice(0, 4).every((s) => s === 1), 10_000);
    expect((await previewSeqs()).slice(4)).toEqual([0, 0]);
    await node.close();
    expect(await previewSeqs()).toEqual([1, 1, 1, 1, 1, 1]);
  });
});
