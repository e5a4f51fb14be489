import { describe, expect, it } from 'vitest';
import { ServerMessages } from '../../realtime/protocol/serverMessages.js';
import { join } from '../realtime/helpers/client.js';
import { lessonWithLinks } from '../realtime/helpers/fixtures.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { spawnGateway } from '../realtime/helpers/processes.js';

/**
 * Pointers, following and "Everyone follow me" through the real gateway with
 * real sockets: node A in this process, node B a real gateway process on the
 * same database and Redis.
 */
const a = await startTestGateway();
const b = await spawnGateway(a.env);

async function lesson() {
  const f = await lessonWithLinks(a.deps.sql, { mode: 'board_only' });
  return { ...f, teacher: () => f.link('t1', { role: 'teacher', name: 'Anna' }) };
}

describe('pointers and views between people', () => {
  it('relays a laser pointer, a pointer leaving and a view to the others on both nodes, never to the sender', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const s1 = await join(a.wsUrl(await f.link('s1')));
    const s2 = await join(b.wsUrl(await f.link('s2')));
    t.send({ type: 'cursor', x: 10, y: 20, page: 'p1', tool: 'laser', button: 'down', extra: 'dropped' });
    t.send({ type: 'view', page: 'p1', x1: -100, y1: -50, x2: 700, y2: 400 });
    t.send({ type: 'cursor.leave' });
    for (const s of [s1, s2]) {
      const c = await s.waitType('cursor');
      expect(c).toEqual({ type: 'cursor', from: expect.any(String), x: 10, y: 20, page: 'p1', tool: 'laser', button: 'down' });
      expect(ServerMessages.cursor.parse(c)).toBeTruthy();
      expect(ServerMessages.view.parse(await s.waitType('view'))).toMatchObject({ page: 'p1', x1: -100, y2: 400 });
      expect(ServerMessages['cursor.leave'].parse(await s.waitType('cursor.leave')).from).toBe(c.from);
    }
    // the sender's own sockets hear nothing of it
    await s1.waitFor((m) => m.type === 'cursor.leave');
    expect(t.of('cursor').length + t.of('view').length + t.of('cursor.leave').length).toBe(0);
    await Promise.all([t, s1, s2].map((c) => c.close()));
  });

  it('keeps views within 10 a second per person: a burst past 20 is dropped', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const s = await join(a.wsUrl(await f.link('s1')));
    for (let i = 0; i < 40; i++) t.send({ type: 'view', page: 'p1', x1: i, y1: 0, x2: i + 100, y2: 100 });
    t.send({ type: 'ping', id: 'after' });
    await t.waitFor((m) => m.type === 'pong' && m.id === 'after');
    s.send({ type: 'ping', id: 'late' });
    await s.waitFor((m) => m.type === 'pong' && m.id === 'late');
    const got = s.of('view').length;
    expect(got).toBeGreaterThanOrEqual(20);
    expect(got).toBeLessThan(25);
    await Promise.all([t.close(), s.close()]);
  });
});

describe('everyone follows the teacher', () => {
  it('refuses a student who tries to lead, and tells a later joiner on another node whom to follow until the teacher stops', async () => {
    const f = await lesson();
    const t = await join(a.wsUrl(await f.teacher()));
    const s1 = await join(a.wsUrl(await f.link('s1')));
    expect((await s1.waitType('welcome')).lead).toBeNull();
    s1.send({ type: 'lead', on: true });
    expect(await s1.waitType('error')).toMatchObject({ code: 'forbidden', ref: 'lead' });
    expect(t.of('lead')).toEqual([]);

    t.send({ type: 'lead', on: true });
    const teacherId = (await t.waitType('welcome')).you.id;
    expect(await s1.waitType('lead')).toEqual({ type: 'lead', by: teacherId });
    const late = await join(b.wsUrl(await f.link('s2')));
    expect((await late.waitType('welcome')).lead).toBe(teacherId);
    // the student's refused attempt changed nothing
    expect(s1.of('lead')).toEqual([{ type: 'lead', by: teacherId }]);

    s1.send({ type: 'follow', to: teacherId });
    expect(await t.waitType('follow')).toMatchObject({ to: teacherId });
    t.send({ type: 'lead', on: false });
    expect(await late.waitType('lead')).toEqual({ type: 'lead', by: null });
    const later = await join(a.wsUrl(await f.link('s3')));
    expect((await later.waitType('welcome')).lead).toBeNull();
    await Promise.all([t, s1, late, later].map((c) => c.close()));
  });
});
