import { describe, expect, it } from 'vitest';
import { MAX_VERSION, STUDENT_MAX_VERSION, VERSION_STEP } from '../../src/board/schema.js';
import { join, type TestClient } from '../realtime/helpers/client.js';
import { lessonWithLinks } from '../realtime/helpers/fixtures.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { rect, stroke } from './factories.js';

/**
 * The teacher always keeps the board (docs/board.md, "Who keeps the board"): hand-written clients
 * try each version stamp a hostile student could send; the teacher's ordinary edit, lock, delete
 * and undo still apply. Real gateway, sockets, Postgres.
 */
const gw = await startTestGateway({ env: { BOARD_PREVIEW_DEBOUNCE_MS: '60000' } });
const sql = gw.deps.sql;
const MIN_NONCE = -(2 ** 31);

let refs = 0;
async function send(c: TestClient, op: unknown) {
  const ref = `r${refs++}`;
  c.send({ type: 'board.op', ref, op });
  return c.waitFor((m) => (m.type === 'board.ack' || m.type === 'board.reject') && m.ref === ref, `answer to ${ref}`, 10_000);
}

async function classroom() {
  const f = await lessonWithLinks(sql);
  const teacher = await join(gw.wsUrl(await f.link('t', { role: 'teacher' })));
  const student = await join(gw.wsUrl(await f.link('s', { role: 'student' })));
  const row = async (id: string) => {
    const [r] = await sql<{ version: number; version_nonce: number; deleted: boolean; data: { x: number; locked: boolean } | null }[]>`
      SELECT version, version_nonce, deleted, data FROM board_elements WHERE lesson_id = ${f.lesson.id} AND element_id = ${id}`;
    return r;
  };
  return { f, teacher, student, row, close: () => Promise.all([teacher.close(), student.close()]) };
}

describe('who keeps the board', () => {
  it('refuses every stamp at the top of the range from a student: an update, a delete and a new element at version 2^31-1', async () => {
    const { teacher, student, row, close } = await classroom();
    expect(await send(teacher, { type: 'element.add', elements: [rect('a')] })).toMatchObject({ type: 'board.ack' });
    const top = { version: MAX_VERSION, version_nonce: MIN_NONCE };
    expect(await send(student, { type: 'element.update', elements: [rect('a', { ...top, x: 666 })] })).toMatchObject({ type: 'board.reject', code: 'invalid' });
    expect(await send(student, { type: 'element.delete', elements: [{ id: 'a', ...top }] })).toMatchObject({ type: 'board.reject', code: 'invalid' });
    expect(await send(student, { type: 'element.add', elements: [rect('mine', top)] })).toMatchObject({ type: 'board.reject', code: 'invalid' });
    // one step past what a write may raise is refused too; the step itself is a student's right
    expect(await send(student, { type: 'element.update', elements: [rect('a', { version: 1 + VERSION_STEP + 1, x: 1 })] })).toMatchObject({ type: 'board.reject' });
    expect(await row('a')).toMatchObject({ version: 1, deleted: false, data: { x: 10 } });
    await close();
  });

  it("applies the teacher's ordinary edit, lock, delete and undo of an element a student stamped as high as a write may (version + step, lowest nonce)", async () => {
    const { teacher, student, row, close } = await classroom();
    expect(await send(teacher, { type: 'element.add', elements: [rect('a')] })).toMatchObject({ type: 'board.ack' });
    const high = { version: 1 + VERSION_STEP, version_nonce: MIN_NONCE };
    expect(await send(student, { type: 'element.update', elements: [rect('a', { ...high, x: 666 })] })).toMatchObject({ type: 'board.ack' });
    // the teacher's page had not seen it: an ordinary edit at version 2 is stamped one above the student's
    const edit = await send(teacher, { type: 'element.update', elements: [rect('a', { version: 2, version_nonce: 5, x: 20 })] });
    expect(edit).toMatchObject({ type: 'board.ack', restamped: [{ id: 'a', version: 2 + VERSION_STEP, version_nonce: 5 }] });
    expect(await row('a')).toMatchObject({ version: 2 + VERSION_STEP, data: { x: 20 } });
    // the student's page hears the teacher's write with the server's stamp
    const relayed = await student.waitFor((m) => m.type === 'board.ops' && m.ops.some((o: { seq: number }) => o.seq === edit.seq));
    expect(relayed.ops.find((o: { seq: number }) => o.seq === edit.seq).op.elements[0]).toMatchObject({ version: 2 + VERSION_STEP, x: 20 });
    // a student racing the lock with another high stamp loses to it
    expect(await send(student, { type: 'element.update', elements: [rect('a', { version: 2 + 2 * VERSION_STEP, version_nonce: MIN_NONCE, x: 777 })] })).toMatchObject({ type: 'board.ack' });
    expect(await send(teacher, { type: 'element.update', elements: [rect('a', { version: 3, x: 20, locked: true })] })).toMatchObject({ type: 'board.ack' });
    expect(await row('a')).toMatchObject({ version: 3 + 2 * VERSION_STEP, data: { x: 20, locked: true } });
    expect(await send(student, { type: 'element.update', elements: [rect('a', { version: 4 + 2 * VERSION_STEP, x: 1 })] })).toMatchObject({ type: 'board.reject', code: 'forbidden' });
    // delete, then undo (the editor revives the element one version above its own copy)
    expect(await send(teacher, { type: 'element.delete', elements: [{ id: 'a', version: 4, version_nonce: 0 }] })).toMatchObject({ type: 'board.ack' });
    expect(await row('a')).toMatchObject({ deleted: true, version: 4 + 2 * VERSION_STEP });
    expect(await send(teacher, { type: 'element.add', elements: [rect('a', { version: 5, x: 20, locked: true })] })).toMatchObject({ type: 'board.ack' });
    expect(await row('a')).toMatchObject({ deleted: false, version: 5 + 2 * VERSION_STEP, data: { x: 20 } });
    await close();
  });

  it("applies the teacher's edit and delete of an element a student pushed to the student ceiling, which the student cannot raise further", async () => {
    const { f, teacher, student, row, close } = await classroom();
    expect(await send(student, { type: 'element.add', elements: [rect('a')] })).toMatchObject({ type: 'board.ack' });
    // as if the student had stepped it up write after write (some ten thousand writes)
    await sql`UPDATE board_elements SET version = ${STUDENT_MAX_VERSION}, version_nonce = ${MIN_NONCE} WHERE lesson_id = ${f.lesson.id} AND element_id = 'a'`;
    expect(await send(student, { type: 'element.update', elements: [rect('a', { version: STUDENT_MAX_VERSION + 1, x: 1 })] })).toMatchObject({ type: 'board.reject', code: 'invalid' });
    expect(await send(teacher, { type: 'element.update', elements: [rect('a', { version: 2, x: 30 })] })).toMatchObject({ type: 'board.ack' });
    expect(await row('a')).toMatchObject({ version: STUDENT_MAX_VERSION + 1, data: { x: 30 } });
    expect(await send(teacher, { type: 'element.delete', elements: [{ id: 'a', version: 3, version_nonce: 0 }] })).toMatchObject({ type: 'board.ack' });
    expect(await row('a')).toMatchObject({ version: STUDENT_MAX_VERSION + 2, deleted: true });
    await close();
  });

  it('lets the teacher delete every element a student created with the highest stamp a new element may have', async () => {
    const { f, teacher, student, close } = await classroom();
    const ids = Array.from({ length: 100 }, (_, i) => `s${i}`);
    const stamp = { version: VERSION_STEP, version_nonce: MIN_NONCE };
    expect(await send(student, { type: 'element.add', elements: ids.map((id) => rect(id, stamp)) })).toMatchObject({ type: 'board.ack' });
    // the teacher's page deletes them with the editor's own (low) versions
    const r = await send(teacher, { type: 'element.delete', elements: ids.map((id) => ({ id, version: 2, version_nonce: 0 })) });
    expect(r).toMatchObject({ type: 'board.ack' });
    expect(r.restamped).toHaveLength(100);
    const [{ live }] = await sql<{ live: number }[]>`SELECT count(*)::int AS live FROM board_elements WHERE lesson_id = ${f.lesson.id} AND NOT deleted`;
    expect(live).toBe(0);
    await close();
  });
});

describe('strokes in progress obey the rules of the operation that commits them', () => {
  const headOf = (id: string, o: Record<string, unknown> = {}) =>
    (({ points: _p, ...h }) => h)(stroke(id, 3, o) as Extract<ReturnType<typeof stroke>, { type: 'freehand' }>);
  /** Sends a stroke's start and a delta; true when the other participant saw it. */
  async function relayed(from: TestClient, to: TestClient, id: string, head: object, expectSeen: boolean): Promise<void> {
    from.send({ type: 'board.stroke', id, from: 0, points: [[0, 0], [1, 1]], head });
    from.send({ type: 'board.stroke', id, from: 2, points: [[2, 2]] });
    // a marker stroke that passes the rules: once it arrives, the one before it would have too
    const marker = `m${refs++}`;
    from.send({ type: 'board.stroke', id: marker, from: 0, points: [[0, 0]], head: headOf(marker) });
    await to.waitFor((m) => m.type === 'board.stroke' && m.id === marker, `marker ${marker}`);
    expect(to.of('board.stroke').filter((m) => m.id === id).length, `stroke ${id}`).toBe(expectSeen ? 2 : 0);
  }

  it("relays a student's stroke only where the student may draw: not on a locked element's id, another page under a pin, a page that does not exist, nor locked", async () => {
    const { teacher, student, close } = await classroom();
    expect(await send(teacher, { type: 'page.add', page: { id: 'p2', name: 'Two' }, after_page_id: null })).toMatchObject({ type: 'board.ack' });
    expect(await send(teacher, { type: 'element.add', elements: [rect('locked', { locked: true })] })).toMatchObject({ type: 'board.ack' });
    await relayed(student, teacher, 'ok', headOf('ok'), true);
    await relayed(student, teacher, 'locked', headOf('locked'), false);
    await relayed(student, teacher, 'nopage', headOf('nopage', { page_id: 'nowhere' }), false);
    await relayed(student, teacher, 'selflock', headOf('selflock', { locked: true }), false);
    await relayed(student, teacher, 'high', headOf('high', { version: MAX_VERSION }), false);
    expect(await send(teacher, { type: 'page.pin', page_id: 'page-1' })).toMatchObject({ type: 'board.ack' });
    await relayed(student, teacher, 'elsewhere', headOf('elsewhere', { page_id: 'p2' }), false);
    // the teacher may draw anywhere, and a delta without its start is not relayed
    await relayed(teacher, student, 'teachers', headOf('teachers', { page_id: 'p2' }), true);
    student.send({ type: 'board.stroke', id: 'headless', from: 5, points: [[5, 5]] });
    await relayed(student, teacher, 'ok2', headOf('ok2'), true);
    expect(teacher.of('board.stroke').filter((m) => m.id === 'headless')).toEqual([]);
    await close();
  });
});
