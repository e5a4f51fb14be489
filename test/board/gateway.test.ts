import { describe, expect, it } from 'vitest';
import { ServerMessages, WelcomeExtras } from '../../realtime/protocol/serverMessages.js';
import { BoardService } from '../../realtime/features/board/service.js';
import { makeDeps } from '../helpers/deps.js';
import { TestClient, join, type Received } from '../realtime/helpers/client.js';
import { lessonWithLinks, linkFor } from '../realtime/helpers/fixtures.js';
import { createLesson } from '../../src/domain/lessons.js';
import { partnerFactory } from '../helpers/factories.js';
import { eventually } from '../helpers/wait.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { spawnGateway } from '../realtime/helpers/processes.js';
import { del, rect, stroke, text } from './factories.js';
import { until } from './helpers.js';

/**
 * The lesson features through the real gateway, with real sockets: node A
 * runs in this process (startGateway with its default features), node B is a
 * real gateway process (src/main.ts, ROLES=gateway) on the same database and
 * Redis.
 */
const a = await startTestGateway({ env: { BOARD_RELAY_GAP_MS: '300', BOARD_PREVIEW_DEBOUNCE_MS: '60000' } });
const b = await spawnGateway(a.env);
const sql = a.deps.sql;

async function lesson(mode: 'full' | 'board_only' = 'board_only') {
  const f = await lessonWithLinks(sql, { mode });
  return { ...f, teacher: (id = 'teacher-1', name = 'Tess') => f.link(id, { role: 'teacher', name }) };
}

/** What a client saw of the board: seq -> op, from board.ops and from the acks of its own ops. */
function boardView(c: TestClient, mine: Map<string, unknown>): Map<number, unknown> {
  const seen = new Map<number, unknown>();
  for (const m of c.messages) {
    if (m.type === 'board.ops') for (const o of m.ops) seen.set(o.seq, o.op);
    if (m.type === 'board.ack' && m.seq !== null) seen.set(m.seq, mine.get(m.ref));
  }
  return seen;
}

/** Sends a board op and remembers it by ref. */
function sendOp(c: TestClient, mine: Map<string, unknown>, ref: string, op: unknown): void {
  mine.set(ref, op);
  c.send({ type: 'board.op', ref, op });
}

const answered = (c: TestClient, ref: string) => c.waitFor((m) => (m.type === 'board.ack' || m.type === 'board.reject') && m.ref === ref, `answer to ${ref}`, 10_000);

describe('board operations through the gateway', () => {
  it('orders operations of people on two gateway nodes into one sequence that every page sees identically, each sender acknowledged at its place', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const s1 = await join(a.wsUrl(await f.link('s1')));
    const s2 = await join(b.wsUrl(await f.link('s2')));
    const clients = [t, s1, s2];
    const mine = clients.map(() => new Map<string, unknown>());
    const N = 25;
    for (let i = 0; i < N; i++) {
      clients.forEach((c, k) => sendOp(c, mine[k], `c${k}-${i}`, { type: 'element.add', elements: [rect(`e${k}-${i}`, { x: i * 10, y: k * 100 })] }));
    }
    await Promise.all(clients.map((c, k) => Promise.all(Array.from({ length: N }, (_, i) => answered(c, `c${k}-${i}`)))));
    for (const [k, c] of clients.entries()) {
      for (const m of c.of('board.ack')) expect(m.seq, `ack of ${m.ref}`).toEqual(expect.any(Number));
      await until(() => boardView(c, mine[k]).size === 3 * N, 10_000);
    }
    // every page: seqs 1..75 without gaps, in increasing order of arrival, the same op at each seq
    const reference = boardView(t, mine[0]);
    expect([...reference.keys()].sort((x, y) => x - y)).toEqual(Array.from({ length: 3 * N }, (_, i) => i + 1));
    for (const [k, c] of clients.entries()) {
      expect(boardView(c, mine[k])).toEqual(reference);
      const arrival = c.messages.flatMap((m) => (m.type === 'board.ops' ? m.ops.map((o: { seq: number }) => o.seq) : m.type === 'board.ack' ? [m.seq] : []));
      expect(arrival).toEqual([...arrival].sort((x, y) => x - y));
      // nobody gets their own operation back as board.ops
      const own = new Set([...mine[k].values()].map((op) => JSON.stringify(op)));
      for (const m of c.of('board.ops')) for (const o of m.ops) expect(own.has(JSON.stringify(o.op))).toBe(false);
    }
    for (const m of [...t.of('board.ops'), ...t.of('board.ack')]) expect(ServerMessages[m.type as 'board.ops'].safeParse(m).success).toBe(true);
    const [row] = await sql<{ seq: string }[]>`SELECT seq FROM boards WHERE lesson_id = ${f.lesson.id}`;
    expect(Number(row.seq)).toBe(3 * N);
    await Promise.all(clients.map((c) => c.close()));
  }, 30_000);

  it('answers board.sync with the whole board or what changed since a seq, and a page joining later starts from it', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const mine = new Map<string, unknown>();
    sendOp(t, mine, 'r1', { type: 'element.add', elements: [rect('x1'), stroke('x2')] });
    sendOp(t, mine, 'r2', { type: 'element.delete', elements: [del('x1')] });
    sendOp(t, mine, 'r3', { type: 'element.add', elements: [text('x3', 'hello')] });
    await answered(t, 'r3');
    const late = await join(b.wsUrl(await f.link('late')));
    late.send({ type: 'board.sync', since: 0 });
    const full = await late.waitType('board.state');
    expect(ServerMessages['board.state'].parse(full)).toMatchObject({ seq: 3, full: true, pinned_page_id: null });
    // the optional element fields this node keeps: a page sends it no others (rolling deploys)
    expect(full.optional_fields).toEqual(['vertical_align', 'edges']);
    expect(full.elements.map((e: { id: string }) => e.id).sort()).toEqual(['x2', 'x3']);
    late.send({ type: 'board.sync', since: 1 });
    const delta = await late.waitFor((m) => m.type === 'board.state' && !m.full, 'delta state');
    expect(delta).toMatchObject({ seq: 3, full: false, deleted_ids: ['x1'], optional_fields: ['vertical_align', 'edges'] });
    expect(delta.elements.map((e: { id: string }) => e.id)).toEqual(['x3']);
    await Promise.all([t.close(), late.close()]);
  });

  it('refuses malformed and oversized operations without applying anything, and closes a socket that sends a frame over the limit', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const mine = new Map<string, unknown>();
    sendOp(t, mine, 'bad-type', { type: 'element.explode', ids: ['a'] });
    sendOp(t, mine, 'bad-el', { type: 'element.add', elements: [{ ...rect('r1'), width: -5 }] });
    sendOp(t, mine, 'long-text', { type: 'element.add', elements: [text('t1', 'x'.repeat(10_001))] });
    sendOp(t, mine, 'many', { type: 'element.add', elements: Array.from({ length: 101 }, (_, i) => rect(`m${i}`)) });
    sendOp(t, mine, 'no-page', { type: 'element.add', elements: [rect('r2', { page_id: 'page-404' })] });
    t.send({ type: 'board.op', op: { type: 'page.pin', page_id: null } }); // no ref
    t.send({ type: 'board.op', ref: 'x'.repeat(65), op: {} });
    t.send({ type: 'board.sync', since: -1 });
    const rejects = await Promise.all(['bad-type', 'bad-el', 'long-text', 'many', 'no-page'].map((r) => answered(t, r)));
    expect(rejects.map((m) => [m.ref, m.type, m.code])).toEqual([
      ['bad-type', 'board.reject', 'invalid'],
      ['bad-el', 'board.reject', 'invalid'],
      ['long-text', 'board.reject', 'too_large'],
      ['many', 'board.reject', 'too_large'],
      ['no-page', 'board.reject', 'not_found'],
    ]);
    await t.waitFor(() => t.of('error').length >= 3, 'three envelope errors');
    expect(t.of('error').map((e) => [e.code, e.ref])).toEqual([
      ['invalid_message', 'board.op'],
      ['invalid_message', 'board.op'],
      ['invalid_message', 'board.sync'],
    ]);
    const [row] = await sql`SELECT seq FROM boards WHERE lesson_id = ${f.lesson.id}`;
    expect(row === undefined || Number(row.seq) === 0).toBe(true);
    expect(t.ws.readyState).toBe(t.ws.OPEN);

    // a frame over GATEWAY_MAX_PAYLOAD_BYTES (64 KB) closes the socket with 4413
    t.send({ type: 'board.op', ref: 'huge', op: { type: 'element.add', elements: [stroke('big', 4000, { points: Array.from({ length: 4000 }, (_, i) => [i + 0.123456789, i * 2 + 0.987654321]) })] } });
    expect(await t.waitClosed()).toBe(4413);
  });

  it('sends a 2,000-element board (~1 MB) in one board.state without closing the socket', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const els = Array.from({ length: 2000 }, (_, i) => stroke(`s${i}`, 40, { x: i % 50, y: Math.floor(i / 50) }));
    const direct = new BoardService(a.deps);
    for (let i = 0; i < els.length; i += 100) await direct.submit(f.lesson.id, { type: 'element.add', elements: els.slice(i, i + 100) }, { role: 'teacher' });
    await direct.close();
    const s = await join(b.wsUrl(await f.link('s')));
    s.send({ type: 'board.sync', since: 0 });
    const state = await s.waitType('board.state', 15_000);
    expect(state.elements).toHaveLength(2000);
    expect(JSON.stringify(state).length).toBeGreaterThan(1_000_000);
    expect(s.ws.readyState).toBe(s.ws.OPEN);
    await Promise.all([t.close(), s.close()]);
  });
});

describe('reconnection', () => {
  it('a page that lost its socket reconnects (to another node), gets exactly what it missed with board.sync since its seq, sends what it drew offline, and follows on', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const sLink = await f.link('s');
    let s = await join(a.wsUrl(sLink));
    const tMine = new Map<string, unknown>();
    sendOp(t, tMine, 't1', { type: 'element.add', elements: [rect('before'), rect('gone', { z: 'a5' })] });
    await s.waitFor((m) => m.type === 'board.ops' && m.ops.some((o: { seq: number }) => o.seq === 1), 'seq 1');
    const last = 1;
    s.ws.terminate(); // the network drops: no close handshake
    await s.closed;
    // meanwhile the board moves on
    sendOp(t, tMine, 't2', { type: 'element.update', elements: [rect('before', { x: 300, version: 2 })] });
    sendOp(t, tMine, 't3', { type: 'element.delete', elements: [del('gone')] });
    sendOp(t, tMine, 't4', { type: 'element.add', elements: [stroke('while-away')] });
    await answered(t, 't4');

    s = await join(b.wsUrl(sLink));
    s.send({ type: 'board.sync', since: last });
    const delta = ServerMessages['board.state'].parse(await s.waitType('board.state'));
    expect(delta).toMatchObject({ seq: 4, full: false, deleted_ids: ['gone'] });
    expect(delta.elements.map((e) => [e.id, e.x])).toEqual([['before', 300], ['while-away', 0]]);
    // what the page drew while offline: sent again after the sync, acknowledged in order
    const sMine = new Map<string, unknown>();
    sendOp(s, sMine, 'offline-1', { type: 'element.add', elements: [text('offline', 'drawn offline')] });
    expect(await answered(s, 'offline-1')).toMatchObject({ type: 'board.ack', seq: 5 });
    // sending it again (its ack lost) changes nothing: the same version is not newer
    sendOp(s, sMine, 'offline-1b', { type: 'element.add', elements: [text('offline', 'drawn offline')] });
    expect(await answered(s, 'offline-1b')).toMatchObject({ type: 'board.ack', seq: null });
    // and it follows the live stream from there
    sendOp(t, tMine, 't6', { type: 'element.add', elements: [rect('after')] });
    const next = await s.waitFor((m) => m.type === 'board.ops' && m.ops.some((o: { seq: number }) => o.seq === 6), 'seq 6');
    expect(next.ops.map((o: { seq: number }) => o.seq)).toEqual([6]);
    await t.waitFor((m) => m.type === 'board.ops' && m.ops.some((o: { seq: number }) => o.seq === 5), 'seq 5 at the teacher');
    await Promise.all([t.close(), s.close()]);
  });
});

describe('versions and locks', () => {
  it('revives a deleted element with a newer version (undo), tells the sender which of its elements lost to a newer one', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const s = await join(b.wsUrl(await f.link('s')));
    const tMine = new Map<string, unknown>();
    const sMine = new Map<string, unknown>();
    sendOp(t, tMine, 'add', { type: 'element.add', elements: [rect('u'), rect('w', { z: 'a1' })] });
    await answered(t, 'add');
    sendOp(t, tMine, 'del', { type: 'element.delete', elements: [del('u', 2)] });
    await answered(t, 'del');
    // the student's edit of u made before it saw the delete (same version, higher nonce) and a new edit of w
    sendOp(s, sMine, 'late', { type: 'element.update', elements: [rect('u', { version: 2, version_nonce: 5, x: 1 }), rect('w', { version: 2, z: 'a1', x: 2 })] });
    expect(await answered(s, 'late')).toMatchObject({ type: 'board.ack', seq: 3, skipped: ['u'] });
    const relayed = await t.waitFor((m) => m.type === 'board.ops' && m.ops.some((o: { seq: number }) => o.seq === 3), 'seq 3');
    expect(relayed.ops[0].op.elements.map((e: { id: string }) => e.id)).toEqual(['w']);
    // undo of the delete
    sendOp(t, tMine, 'undo', { type: 'element.add', elements: [rect('u', { version: 3 })] });
    expect(await answered(t, 'undo')).toMatchObject({ type: 'board.ack', seq: 4 });
    s.send({ type: 'board.sync', since: 0 });
    const full = await s.waitType('board.state');
    expect(full.elements.map((e: { id: string; version: number }) => [e.id, e.version])).toEqual([['u', 3], ['w', 2]]);
    await Promise.all([t.close(), s.close()]);
  });

  it('refuses a hand-written student client that changes, deletes or unlocks the teacher\'s locked element, and nothing changes', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const tMine = new Map<string, unknown>();
    sendOp(t, tMine, 'lock', { type: 'element.add', elements: [rect('plan', { locked: true, x: 40 })] });
    await answered(t, 'lock');
    // a student's client written by hand, not the page: it skips the editor's lock and sends raw operations
    const s = await join(b.wsUrl(await f.link('attacker')));
    const sMine = new Map<string, unknown>();
    const attacks = [
      { type: 'element.update', elements: [rect('plan', { locked: true, x: 999, version: 50 })] },
      { type: 'element.update', elements: [rect('plan', { locked: false, version: 51 })] },
      { type: 'element.add', elements: [rect('plan', { locked: false, version: 2 ** 31 - 1 })] },
      { type: 'element.delete', elements: [del('plan', 2 ** 31 - 1)] },
      { type: 'page.delete', page_id: 'page-1' },
    ];
    for (const [i, op] of attacks.entries()) {
      sendOp(s, sMine, `x${i}`, op);
      expect(await answered(s, `x${i}`), JSON.stringify(op).slice(0, 60)).toMatchObject({ type: 'board.reject', code: 'forbidden' });
    }
    s.send({ type: 'board.sync', since: 0 });
    const state = await s.waitType('board.state');
    expect(state).toMatchObject({ seq: 1, elements: [{ id: 'plan', locked: true, x: 40, version: 1 }] });
    expect(t.of('board.ops')).toEqual([]);
    // the teacher may move and unlock it; then the student may change it
    sendOp(t, tMine, 'unlock', { type: 'element.update', elements: [rect('plan', { locked: false, version: 2 })] });
    await answered(t, 'unlock');
    sendOp(s, sMine, 'ok', { type: 'element.update', elements: [rect('plan', { x: 5, version: 3 })] });
    expect(await answered(s, 'ok')).toMatchObject({ type: 'board.ack', seq: 3 });
    await Promise.all([t.close(), s.close()]);
  });
});

describe('strokes in progress', () => {
  it('relays board.stroke to the others in the lesson on every node (not the sender), with `by` from the link, and stores nothing', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const s1 = await join(b.wsUrl(await f.link('s1')));
    const other = await lesson();
    const outsider = await join(b.wsUrl(await other.link('x')));
    const head = (({ points: _p, ...h }) => h)(stroke('live', 3) as Extract<ReturnType<typeof stroke>, { type: 'freehand' }>);
    t.send({ type: 'board.stroke', id: 'live', from: 0, points: [[0, 0], [1, 1]], head });
    t.send({ type: 'board.stroke', id: 'live', from: 2, points: [[2, 3]] });
    const first = await s1.waitFor((m) => m.type === 'board.stroke' && m.from === 0, 'first delta');
    expect(ServerMessages['board.stroke'].parse(first)).toMatchObject({ id: 'live', by: t.of('welcome')[0].you.id, head: { page_id: 'page-1', type: 'freehand' } });
    await s1.waitFor((m) => m.type === 'board.stroke' && m.from === 2, 'second delta');
    // a bad delta is refused like any message, and nothing reached Postgres
    t.send({ type: 'board.stroke', id: 'live', from: -1, points: [] });
    await t.waitFor((m) => m.type === 'error', 'refusal');
    const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM board_elements WHERE lesson_id = ${f.lesson.id}`;
    expect(row.n).toBe(0);
    expect(t.of('board.stroke')).toEqual([]);
    expect(outsider.of('board.stroke')).toEqual([]);
    await Promise.all([t.close(), s1.close(), outsider.close()]);
  });

  it('drops deltas over 20 a second (bursts of 40) from one connection', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const s1 = await join(a.wsUrl(await f.link('s1')));
    const head = (({ points: _p, ...h }) => h)(stroke('fast', 3) as Extract<ReturnType<typeof stroke>, { type: 'freehand' }>);
    for (let i = 0; i < 100; i++) t.send({ type: 'board.stroke', id: 'fast', from: i, points: [[i, i]], ...(i === 0 ? { head } : {}) });
    await s1.waitFor((m) => m.type === 'board.stroke' && m.from >= 39, 'the burst');
    // A later stroke of the same connection is relayed after every delta of 'fast' (a connection's
    // strokes leave in the order drawn): once it arrives, nothing more of 'fast' can. It is sent
    // again until the bucket has a token for it (until then it is dropped like the deltas).
    await eventually(
      async () => {
        t.send({ type: 'board.stroke', id: 'later', from: 0, points: [[0, 0]], head: { ...head, id: 'later' } });
        return s1.messages.some((m) => m.type === 'board.stroke' && m.id === 'later');
      },
      'a later stroke',
      10_000,
      60,
    );
    const n = s1.of('board.stroke').filter((m) => m.id === 'fast').length;
    expect(n).toBeGreaterThanOrEqual(40);
    expect(n).toBeLessThan(50);
    await Promise.all([t.close(), s1.close()]);
  });
});

describe('subject modes', () => {
  it('tells every page the subject mode of its lesson, and formulas and vectors travel and are stored like any element', async () => {
    const { partner } = await partnerFactory(sql);
    const lessons = Object.fromEntries(
      await Promise.all((['generic', 'math', 'physics'] as const).map(async (m) => [m, await createLesson(sql, partner, { title: m, subject_mode: m }, new Date())] as const)),
    );
    for (const [mode, l] of Object.entries(lessons)) {
      const c = await join(b.wsUrl(await linkFor(sql, partner, l, 'u1')));
      expect(c.of('welcome')[0].lesson).toMatchObject({ id: l.id, subject_mode: mode });
      await c.close();
    }
    const base = { page_id: 'page-1', z: 'a0', x: 40, y: 40, angle: 0, style: rect('x').style, locked: false, version: 1, version_nonce: 0 };
    const formula = { ...base, id: 'f1', type: 'formula', latex: 'x_{1,2} = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}', font_size: 24, width: 240, height: 60 };
    const vector = { ...base, id: 'v1', type: 'vector', dx: 120, dy: -40, label: 'F', magnitude: 10, unit: 'N' };
    for (const [mode, el] of [['math', formula], ['physics', vector]] as const) {
      const l = lessons[mode];
      const t = await join(a.wsUrl(await linkFor(sql, partner, l, 't', { role: 'teacher' })));
      const s = await join(b.wsUrl(await linkFor(sql, partner, l, 's')));
      const mine = new Map<string, unknown>();
      sendOp(t, mine, 'r1', { type: 'element.add', elements: [el] });
      expect(await answered(t, 'r1')).toMatchObject({ type: 'board.ack', seq: 1 });
      const got = await s.waitType('board.ops');
      expect(got.ops[0].op.elements[0]).toEqual(el);
      s.send({ type: 'board.sync', since: 0 });
      expect((await s.waitType('board.state')).elements).toEqual([el]);
      await Promise.all([t.close(), s.close()]);
    }
  });
});

describe('preview', () => {
  it('is rendered as soon as the last participant of the lesson leaves the node, without waiting for the debounce', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const mine = new Map<string, unknown>();
    sendOp(t, mine, 'r1', { type: 'element.add', elements: [rect('p1'), stroke('p2')] });
    await answered(t, 'r1');
    const previewSeq = async (lessonId = f.lesson.id) => Number((await sql`SELECT seq FROM board_previews WHERE lesson_id = ${lessonId}`)[0]?.seq ?? 0);
    // Another lesson's render on this node, caused later: a node renders one lesson at a time, in the
    // order they were queued, so a render queued by r1's commit would be stored before this one is.
    const later = await lesson();
    const lt = await join(a.wsUrl(await later.teacher()));
    sendOp(lt, new Map(), 'l1', { type: 'element.add', elements: [rect('l1')] });
    await answered(lt, 'l1');
    await lt.close();
    // (behind the renders of this file's earlier lessons, queued as their pages closed: on a loaded machine they take seconds)
    await until(async () => (await previewSeq(later.lesson.id)) === 1, 15_000);
    expect(await previewSeq()).toBe(0); // this file's debounce is a minute
    await t.close();
    await until(async () => (await previewSeq()) === 1, 5000);
  });
});

describe('a lost relay message', () => {
  it('makes every page resync, and a sender whose operation was held behind the gap still gets its ack', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const s = await join(b.wsUrl(await f.link('s')));
    // An operation committed by a node whose relay message never arrives (it publishes under another prefix).
    const lostDeps = makeDeps({ env: { ...a.env, REDIS_KEY_PREFIX: `${a.env.REDIS_KEY_PREFIX}lost:` } });
    const lost = new BoardService(lostDeps);
    expect(await lost.submit(f.lesson.id, { type: 'element.add', elements: [rect('lost')] }, { role: 'teacher' })).toEqual({ seq: 1 });
    await lost.close();
    await lostDeps.close();

    const mine = new Map<string, unknown>();
    sendOp(t, mine, 'after-gap', { type: 'element.add', elements: [rect('mine')] });
    const resync = await t.waitType('board.resync', 5000);
    expect(resync).toEqual({ type: 'board.resync', seq: 2 });
    expect(await answered(t, 'after-gap')).toEqual({ type: 'board.ack', ref: 'after-gap', seq: 2 });
    expect(await s.waitType('board.resync', 5000)).toEqual({ type: 'board.resync', seq: 2 });
    s.send({ type: 'board.sync', since: 0 });
    expect((await s.waitType('board.state')).elements.map((e: { id: string }) => e.id).sort()).toEqual(['lost', 'mine']);
    await Promise.all([t.close(), s.close()]);
  });
});

describe('pinned pages', () => {
  it('moves everyone to a page the teacher pins; students cannot act outside it or pin, until the teacher unpins', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const s = await join(b.wsUrl(await f.link('s')));
    const tm = new Map<string, unknown>();
    const sm = new Map<string, unknown>();
    sendOp(t, tm, 'p2', { type: 'page.add', page: { id: 'page-2', name: 'Exercise' }, after_page_id: null });
    sendOp(t, tm, 'pin', { type: 'page.pin', page_id: 'page-2' });
    await answered(t, 'pin');
    const pin = await s.waitFor((m) => m.type === 'board.ops' && m.ops.some((o: any) => o.op.type === 'page.pin'), 'the pin');
    expect(pin.ops.find((o: any) => o.op.type === 'page.pin').op).toEqual({ type: 'page.pin', page_id: 'page-2' });

    sendOp(s, sm, 'outside', { type: 'element.add', elements: [rect('r-out', { page_id: 'page-1' })] });
    sendOp(s, sm, 'inside', { type: 'element.add', elements: [rect('r-in', { page_id: 'page-2' })] });
    sendOp(s, sm, 'new-page', { type: 'page.add', page: { id: 'page-3', name: 'Mine' }, after_page_id: null });
    sendOp(s, sm, 'unpin', { type: 'page.pin', page_id: null });
    const answers = await Promise.all(['outside', 'inside', 'new-page', 'unpin'].map((r) => answered(s, r)));
    expect(answers.map((m) => m.code ?? 'ack')).toEqual(['pinned', 'ack', 'pinned', 'forbidden']);

    s.send({ type: 'board.sync', since: 0 });
    expect(await s.waitType('board.state')).toMatchObject({ pinned_page_id: 'page-2' });
    sendOp(t, tm, 'unpin', { type: 'page.pin', page_id: null });
    await answered(t, 'unpin');
    sendOp(s, sm, 'after', { type: 'element.add', elements: [rect('r-after', { page_id: 'page-1' })] });
    expect((await answered(s, 'after')).type).toBe('board.ack');
    await Promise.all([t.close(), s.close()]);
  });
});

describe('teacher rights', () => {
  it('removes a participant: their sockets on every node close with 4403, and their link is refused at the upgrade and the page on every node, after a restart too', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const token = await f.link('noisy', { name: 'Noisy' });
    const s1 = await join(b.wsUrl(token)); // two tabs, on two nodes
    const s2 = await join(a.wsUrl(token));
    const other = await join(b.wsUrl(await f.link('calm')));
    const id = s1.of('welcome')[0].you.id;

    // a student cannot remove anyone
    other.send({ type: 'teacher.remove', participant_id: id });
    expect(await other.waitType('error')).toMatchObject({ code: 'forbidden', ref: 'teacher.remove' });

    t.send({ type: 'teacher.remove', participant_id: id });
    expect(await s1.waitClosed()).toBe(4403);
    expect(await s2.waitClosed()).toBe(4403);
    await t.waitFor((m) => m.type === 'presence' && m.event === 'left' && m.person.id === id, 'the removed person left');
    expect(other.ws.readyState).toBe(other.ws.OPEN);

    for (const node of [a, b]) {
      const again = new TestClient(node.wsUrl(token));
      await expect(again.opened).rejects.toThrow('403');
      const page = await fetch(node.wsUrl(token).replace('ws:', 'http:').replace(/\/ws\?token=.*/, `/embed/${token}`));
      expect(page.status).toBe(403);
      expect(page.headers.get('cache-control')).toBe('no-store');
    }
    // durable: a gateway started after the removal refuses it as well
    const c = await spawnGateway(a.env);
    await expect(new TestClient(c.wsUrl(token)).opened).rejects.toThrow('403');
    await c.stop();
    const [row] = await sql`SELECT person_id, removed_by FROM lesson_removals WHERE lesson_id = ${f.lesson.id}`;
    expect(row).toEqual({ person_id: id, removed_by: t.of('welcome')[0].you.id });

    // a link issued after the removal lets the person back in (the partner decided so)
    const back = await join(b.wsUrl(await f.link('noisy', { name: 'Noisy' })));
    expect(back.of('welcome')[0].you.id).toBe(id);
    await Promise.all([t.close(), other.close(), back.close()]);
  }, 60_000);

  it("mutes a student's microphone: every page is told at once, the student's own 'on' stays off until the teacher allows it", async () => {
    const f = await lesson('full');
    const t = await join(a.wsUrl(await f.teacher()));
    const s = await join(b.wsUrl(await f.link('s', { name: 'Sam' })));
    const o = await join(a.wsUrl(await f.link('o', { name: 'Olga' })));
    const sid = s.of('welcome')[0].you.id;
    const tid = t.of('welcome')[0].you.id;
    const stateOf = (c: TestClient, id: string) => c.of('media.state').filter((m) => m.participant_id === id).sort((x, y) => x.v - y.v).at(-1);

    s.send({ type: 'media.state', camera: true, mic: true });
    t.send({ type: 'media.state', camera: true, mic: true });
    await until(() => stateOf(o, sid)?.mic === true && stateOf(o, tid)?.mic === true);

    // students cannot mute; teachers cannot be muted
    s.send({ type: 'teacher.mute', participant_id: tid, mic: true });
    expect(await s.waitType('error')).toMatchObject({ code: 'forbidden', ref: 'teacher.mute' });
    const t2 = await join(a.wsUrl(await f.teacher('teacher-2', 'Tom')));
    t2.send({ type: 'teacher.mute', participant_id: tid, mic: true });
    expect(await t2.waitType('error')).toMatchObject({ code: 'forbidden', message: 'teachers cannot be muted' });

    t.send({ type: 'teacher.mute', participant_id: sid, mic: true });
    expect(await s.waitType('muted')).toEqual({ type: 'muted', camera: false, mic: true, by: 'Tess' });
    await until(() => stateOf(o, sid)?.mic === false);
    expect(ServerMessages['media.state'].parse(stateOf(o, sid))).toMatchObject({ camera: true, mic: false, mic_blocked: true, camera_blocked: false });

    // a page that ignores the mute and says its microphone is on is still reported off
    s.send({ type: 'media.state', camera: true, mic: true });
    const v = stateOf(o, sid).v;
    await until(() => stateOf(o, sid).v > v);
    expect(stateOf(o, sid)).toMatchObject({ mic: false, mic_blocked: true });

    // a page joining now learns it in welcome
    const late = await join(b.wsUrl(await f.link('late')));
    expect(WelcomeExtras.parse(late.of('welcome')[0]).media![sid]).toMatchObject({ mic: false, mic_blocked: true, camera: true });

    t.send({ type: 'teacher.unmute', participant_id: sid, mic: true });
    expect(await s.waitType('unmuted')).toMatchObject({ mic: true, camera: false });
    await until(() => stateOf(o, sid)?.mic_blocked === false);
    expect(stateOf(o, sid).mic).toBe(false); // the gateway never turns a microphone on
    s.send({ type: 'media.state', camera: true, mic: true });
    await until(() => stateOf(o, sid)?.mic === true);

    // the camera alone
    t.send({ type: 'teacher.mute', participant_id: sid, camera: true });
    await s.waitFor((m) => m.type === 'muted' && m.camera === true, 'camera muted');
    await until(() => stateOf(o, sid)?.camera === false);
    expect(stateOf(o, sid)).toMatchObject({ camera: false, camera_blocked: true, mic: true, mic_blocked: false });
    await Promise.all([t, s, o, t2, late].map((c) => c.close()));
  }, 30_000);
});

describe('video call signalling', () => {
  it('relays offer, answer and ICE only to the named person, across nodes, with the sender set by the gateway', async () => {
    const f = await lesson('full');
    const t = await join(a.wsUrl(await f.teacher()));
    const s = await join(b.wsUrl(await f.link('s')));
    const o = await join(b.wsUrl(await f.link('o')));
    const outsider = await join(a.wsUrl(await (await lesson('full')).link('x')));
    const [tid, sid] = [t, s].map((c) => c.of('welcome')[0].you.id);
    expect(WelcomeExtras.parse(t.of('welcome')[0])).toMatchObject({ ice_servers: [], chat: [] });

    t.send({ type: 'rtc.offer', to: sid, sdp: 'v=0 offer' });
    // from_conn: the sender's call id (docs/protocol.md, "Video call"; test/realtime/call-connections.test.ts)
    expect(await s.waitType('rtc.offer')).toEqual({ type: 'rtc.offer', from: tid, from_conn: t.of('welcome')[0].call_id, sdp: 'v=0 offer' });
    s.send({ type: 'rtc.answer', to: tid, sdp: 'v=0 answer' });
    expect(await t.waitType('rtc.answer')).toEqual({ type: 'rtc.answer', from: sid, from_conn: s.of('welcome')[0].call_id, sdp: 'v=0 answer' });
    const candidate = { candidate: 'candidate:1 1 udp 2122260223 192.0.2.1 54400 typ host', sdpMid: '0', sdpMLineIndex: 0 };
    s.send({ type: 'rtc.ice', to: tid, candidate });
    expect(await t.waitType('rtc.ice')).toEqual({ type: 'rtc.ice', from: sid, from_conn: s.of('welcome')[0].call_id, candidate });
    t.send({ type: 'rtc.offer', to: 'AAAAAAAAAAAAAAAA', sdp: 'v=0' }); // nobody: dropped
    t.send({ type: 'rtc.offer', to: tid, sdp: 'v=0' });
    expect(await t.waitType('error')).toMatchObject({ code: 'not_found', ref: 'rtc.offer' });
    // A later offer of the teacher's to o: a socket's signals leave in the order they came, over one
    // publisher, so once it reaches o nothing earlier can. Then a chat line of the outsider's own, which
    // node a writes to its socket after anything it wrote there while handling the teacher's signals.
    t.send({ type: 'rtc.offer', to: o.of('welcome')[0].you.id, sdp: 'v=0 later' });
    await o.waitFor((m) => m.type === 'rtc.offer' && m.sdp === 'v=0 later', 'the later offer');
    outsider.send({ type: 'chat.send', text: 'later' });
    await outsider.waitType('chat');
    expect(o.messages.filter((m) => m.type.startsWith('rtc.')).map((m) => m.sdp)).toEqual(['v=0 later']);
    expect(outsider.messages.filter((m) => m.type.startsWith('rtc.'))).toEqual([]);
    await Promise.all([t, s, o, outsider].map((c) => c.close()));
  });

  it('refuses signalling, media state and mutes in board_only lessons, and welcome has no ICE servers there', async () => {
    const f = await lesson('board_only');
    const t = await join(a.wsUrl(await f.teacher()));
    const s = await join(b.wsUrl(await f.link('s')));
    const sid = s.of('welcome')[0].you.id;
    expect(t.of('welcome')[0].ice_servers).toBeUndefined();
    const refused = ['rtc.offer', 'rtc.answer', 'rtc.ice', 'media.state', 'teacher.mute'];
    t.send({ type: 'rtc.offer', to: sid, sdp: 'v=0' });
    t.send({ type: 'rtc.answer', to: sid, sdp: 'v=0' });
    t.send({ type: 'rtc.ice', to: sid, candidate: { candidate: 'candidate:1' } });
    t.send({ type: 'media.state', camera: true, mic: true });
    t.send({ type: 'teacher.mute', participant_id: sid, mic: true });
    await t.waitFor(() => t.of('error').length === refused.length, 'five refusals');
    expect(t.of('error').map((e) => [e.code, e.ref])).toEqual(refused.map((r) => ['board_only', r]));
    // a chat line of the teacher's, sent after the refusals came, reaches s over the same publisher
    // after anything handling those messages could have sent
    t.send({ type: 'chat.send', text: 'later' });
    await s.waitType('chat');
    expect(s.messages.filter((m) => m.type.startsWith('rtc.') || m.type === 'muted' || m.type === 'media.state')).toEqual([]);
    expect(t.ws.readyState).toBe(t.ws.OPEN);
    await Promise.all([t.close(), s.close()]);
  });
});

describe('chat', () => {
  it('reaches everyone in the lesson on every node (sender included), nobody outside it, and the last lines come with welcome', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const s = await join(b.wsUrl(await f.link('s', { name: 'Sam' })));
    const outsider = await join(b.wsUrl(await (await lesson()).link('x')));
    s.send({ type: 'chat.send', text: '  Hello, teacher!  ' });
    const line = await t.waitType('chat');
    expect(ServerMessages.chat.parse(line)).toEqual({ type: 'chat', id: expect.any(String), from: { id: s.of('welcome')[0].you.id, name: 'Sam', role: 'student' }, text: 'Hello, teacher!', at: expect.any(String) });
    expect((await s.waitType('chat')).id).toBe(line.id);
    s.send({ type: 'chat.send', text: '<b>not html</b>' });
    await t.waitFor(() => t.of('chat').length === 2, 'second line');
    const late = await join(a.wsUrl(await f.link('late')));
    expect(late.of('welcome')[0].chat.map((l: Received) => l.text)).toEqual(['Hello, teacher!', '<b>not html</b>']);
    expect(outsider.of('chat')).toEqual([]);
    expect(outsider.of('welcome')[0].chat).toEqual([]);
    await Promise.all([t, s, outsider, late].map((c) => c.close()));
  });

  it('refuses more than a burst of chat lines from one connection', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    for (let i = 0; i < 15; i++) t.send({ type: 'chat.send', text: `line ${i}` });
    await t.waitFor((m) => m.type === 'error' && m.code === 'rate_limited', 'rate limit');
    // A socket's chat lines and board operations are decided in one queue, in arrival order
    // (admission/PersonRates.ts), and a line goes to its sender as it is decided: once a later
    // operation is answered, every line has come back or been refused.
    sendOp(t, new Map(), 'later', { type: 'element.add', elements: [rect('later')] });
    await answered(t, 'later');
    expect(t.of('chat').length).toBeGreaterThanOrEqual(10);
    expect(t.of('chat').length).toBeLessThan(15);
    await t.close();
  });
});
