import http from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import { archiveLesson } from '../../src/domain/lessons.js';
import { CursorRelayMessage, ErrorMessage, PresenceMessage, WelcomeMessage } from '../../realtime/protocol/serverMessages.js';
import { startTestGateway } from './helpers/gateway.js';
import { join, TestClient } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';

const gw = await startTestGateway();
const { sql } = gw.deps;

describe('upgrade', () => {
  it('refuses an unknown token with HTTP 401 and an expired one with 401, before upgrading', async () => {
    const unknown = new TestClient(gw.wsUrl('x'.repeat(43)));
    await expect(unknown.opened).rejects.toThrow(/401/);
    const missing = new TestClient(`ws://127.0.0.1:${gw.port}/ws`);
    await expect(missing.opened).rejects.toThrow(/401/);

    const f = await lessonWithLinks(sql);
    const expired = await f.link('old', { ttl: 15, at: new Date(Date.now() - 16 * 60_000) });
    const c = new TestClient(gw.wsUrl(expired));
    await expect(c.opened).rejects.toThrow(/401/);
  });

  it('refuses a link of an archived lesson with HTTP 410', async () => {
    const f = await lessonWithLinks(sql);
    const token = await f.link('ann');
    await archiveLesson(sql, f.partner.id, f.lesson.id, new Date());
    await vi.waitFor(() => expect(gw.gateway.admission.cached(token)).toBe(false));
    const c = new TestClient(gw.wsUrl(token));
    await expect(c.opened).rejects.toThrow(/410/);
  });

  describe('links announced by Postgres when they are issued (link_issued)', () => {
    const admission = gw.gateway.admission;
    const heard = (token: string) => vi.waitFor(() => expect(admission.cached(token)).toBe(true));

    it('admits the first upgrade of a link issued while the gateway listens without a lookup', async () => {
      const f = await lessonWithLinks(sql);
      const ann = await f.link('ann', { name: 'Ann' });
      await heard(ann);
      const before = admission.lookupsMade;
      const c = await join(gw.wsUrl(ann));
      expect(c.messages[0]).toMatchObject({ type: 'welcome', you: { name: 'Ann', role: 'student' }, lesson: { id: f.lesson.id } });
      expect(admission.lookupsMade).toBe(before);
      c.close();
    });

    it('still refuses an announced link once it expires', async () => {
      const f = await lessonWithLinks(sql);
      const late = await f.link('late', { ttl: 15, at: new Date(Date.now() - 16 * 60_000) });
      await heard(late);
      await expect(new TestClient(gw.wsUrl(late)).opened).rejects.toThrow(/401/);
    });

    it("drops a deleted lesson's announced links at once, and issues no link of a deleted lesson", async () => {
      const f = await lessonWithLinks(sql);
      const ann = await f.link('ann');
      await heard(ann);
      await archiveLesson(sql, f.partner.id, f.lesson.id, new Date());
      await vi.waitFor(() => expect(admission.cached(ann)).toBe(false));
      await expect(new TestClient(gw.wsUrl(ann)).opened).rejects.toThrow(/410/);
      // after the delete (the API's check raced it) no link is issued: the insert sees the delete
      await expect(f.link('late')).rejects.toMatchObject({ status: 410, code: 'archived' });
    });

    it('forgets every announced link when its LISTEN connection comes back (a delete may have been missed)', async () => {
      const f = await lessonWithLinks(sql);
      const ann = await f.link('ann');
      await heard(ann);
      await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = current_database() AND query ILIKE 'listen %' AND pid <> pg_backend_pid()`;
      await vi.waitFor(() => expect(admission.cached(ann)).toBe(false), { timeout: 10_000 });
      const c = await join(gw.wsUrl(ann));
      expect(c.messages[0]).toMatchObject({ type: 'welcome' });
      c.close();
    });
  });

  it('answers the refused upgrade with the API error body', async () => {
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(gw.httpUrl('/ws?token=nope'), {
        headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
      });
      req.on('response', (r) => {
        let body = '';
        r.on('data', (d) => (body += d));
        r.on('end', () => resolve({ status: r.statusCode!, body }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body)).toEqual({ detail: { code: 'unauthorized', message: expect.any(String) } });
  });
});

describe('welcome and presence', () => {
  it('sends welcome first: who you are, who else is here, the lesson and its mode, never the user id', async () => {
    const f = await lessonWithLinks(sql, { mode: 'board_only' });
    const teacher = await join(gw.wsUrl(await f.link('user-teacher-1', { role: 'teacher', name: 'Tess' })));
    const student = new TestClient(gw.wsUrl(await f.link('user-student-1', { name: 'Sam' })));
    const w = await student.welcome();
    expect(student.messages[0].type).toBe('welcome');
    expect(WelcomeMessage.parse(w)).toBeTruthy();
    expect(w.you).toEqual({ id: expect.any(String), name: 'Sam', role: 'student' });
    expect(w.lesson).toEqual({ id: f.lesson.id, title: 'Lesson', mode: 'board_only', subject_mode: 'generic' });
    expect(w.people.map((p: any) => p.name).sort()).toEqual(['Sam', 'Tess']);
    expect(JSON.stringify(student.messages)).not.toContain('user-teacher-1');
    expect(JSON.stringify(student.messages)).not.toContain('user-student-1');

    const joined = await teacher.waitFor((m) => m.type === 'presence' && m.event === 'joined', 'presence joined');
    expect(PresenceMessage.parse(joined)).toMatchObject({ event: 'joined', person: { name: 'Sam', role: 'student', id: w.you.id }, count: 2 });
    await student.close();
    const left = await teacher.waitFor((m) => m.type === 'presence' && m.event === 'left', 'presence left');
    expect(left).toMatchObject({ person: { id: w.you.id, name: 'Sam' }, count: 1 });
    await teacher.close();
  });

  it('counts one person in two tabs once: one joined event, and left only when the last tab closes', async () => {
    const f = await lessonWithLinks(sql);
    const watcher = await join(gw.wsUrl(await f.link('watcher')));
    const token = await f.link('twotabs');
    const tab1 = await join(gw.wsUrl(token));
    const tab2 = await join(gw.wsUrl(token));
    expect(tab2.of('welcome')[0].people).toHaveLength(2);
    expect(tab1.of('welcome')[0].you.id).toBe(tab2.of('welcome')[0].you.id);
    await tab1.close();
    await tab2.ws.ping();
    await new Promise((r) => setTimeout(r, 100));
    expect(watcher.of('presence').filter((m) => m.event === 'left')).toHaveLength(0);
    await tab2.close();
    await watcher.waitFor((m) => m.type === 'presence' && m.event === 'left', 'left');
    expect(watcher.of('presence').map((m) => m.event)).toEqual(['joined', 'left']);
    await watcher.close();
  });

  it('gives a person a different public id in every lesson', async () => {
    const a = await lessonWithLinks(sql);
    const b = await lessonWithLinks(sql);
    // same partner user id in two lessons of two partners: ids differ anyway
    const c1 = await join(gw.wsUrl(await a.link('same-user')));
    const c2 = await join(gw.wsUrl(await b.link('same-user')));
    expect(c1.of('welcome')[0].you.id).not.toBe(c2.of('welcome')[0].you.id);
    await Promise.all([c1.close(), c2.close()]);
  });
});

describe('messages', () => {
  it('relays a cursor to everyone else in the lesson, with the sender id, and not back to the sender', async () => {
    const f = await lessonWithLinks(sql);
    const a = await join(gw.wsUrl(await f.link('a')));
    const b = await join(gw.wsUrl(await f.link('b')));
    const c = await join(gw.wsUrl(await f.link('c')));
    const other = await lessonWithLinks(sql);
    const outsider = await join(gw.wsUrl(await other.link('z')));
    a.send({ type: 'cursor', x: 10.5, y: -3, page: 'p1', extra: 'dropped' });
    const got = await b.waitType('cursor');
    expect(CursorRelayMessage.parse(got)).toEqual({ type: 'cursor', from: a.of('welcome')[0].you.id, x: 10.5, y: -3, page: 'p1' });
    expect(got).not.toHaveProperty('extra');
    await c.waitType('cursor');
    await new Promise((r) => setTimeout(r, 100));
    expect(a.of('cursor')).toHaveLength(0);
    expect(outsider.of('cursor')).toHaveLength(0);
    await Promise.all([a.close(), b.close(), c.close(), outsider.close()]);
  });

  it('answers bad frames with an error message and keeps the connection', async () => {
    const f = await lessonWithLinks(sql);
    const a = await join(gw.wsUrl(await f.link('a')));
    a.send('not json');
    a.send({ no: 'type' });
    a.send({ type: 'teleport' });
    a.send({ type: 'cursor', x: 'left', y: 1 });
    a.ws.send(Buffer.from([1, 2, 3]), { binary: true });
    a.send({ type: 'ping', id: 7 });
    const pong = await a.waitType('pong');
    expect(pong).toMatchObject({ type: 'pong', id: 7, t: expect.any(Number) });
    const errors = a.of('error');
    for (const e of errors) ErrorMessage.parse(e);
    expect(errors.map((e) => e.code)).toEqual(['bad_json', 'bad_message', 'unknown_type', 'invalid_message', 'binary_not_supported']);
    expect(errors[2].ref).toBe('teleport');
    expect(errors[3].message).toContain('x');
    expect(a.ws.readyState).toBe(a.ws.OPEN);
    await a.close();
  });
});

describe('participant page', () => {
  it('serves the page for a valid link, 401 for an unknown or expired one, 410 for a deleted lesson', async () => {
    const f = await lessonWithLinks(sql);
    const token = await f.link('page-user');
    const ok = await fetch(gw.httpUrl(`/embed/${token}`));
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toContain('text/html');
    expect(ok.headers.get('referrer-policy')).toBe('no-referrer');
    expect(ok.headers.get('cache-control')).toBe('no-store');
    expect(await ok.text()).toContain('/ws?token=');
    expect((await fetch(gw.httpUrl(`/embed/${'y'.repeat(43)}`))).status).toBe(401);
    const expired = await f.link('late', { ttl: 15, at: new Date(Date.now() - 20 * 60_000) });
    expect((await fetch(gw.httpUrl(`/embed/${expired}`))).status).toBe(401);
    const other = await f.link('before-the-delete');
    await archiveLesson(sql, f.partner.id, f.lesson.id, new Date());
    await vi.waitFor(() => expect(gw.gateway.admission.cached(other)).toBe(false));
    expect((await fetch(gw.httpUrl(`/embed/${other}`))).status).toBe(410);
  });

  it('answers /healthz and /readyz', async () => {
    expect((await fetch(gw.httpUrl('/healthz'))).status).toBe(200);
    const ready = await fetch(gw.httpUrl('/readyz'));
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ready: true, postgres: 'ok', redis: 'ok' });
  });
});
