import { describe, expect, it } from 'vitest';
import { startTestApi } from '../helpers/api.js';
import { isolatedEnv } from '../helpers/isolation.js';
import { partnerFactory } from '../helpers/factories.js';
import { join, TestClient } from './helpers/client.js';
import { spawnGateway, type GatewayProcess } from './helpers/processes.js';

/**
 * The partner's own controls, black-box: two real gateway processes
 * (src/main.ts, ROLES=gateway) and the partner API on one database and Redis.
 * A revoked link and a removed person are shut out everywhere, within 2 s,
 * with the close code the page shows as "removed" (4403), and the page itself
 * refuses the link (403, the "removed" card).
 */
const env = await isolatedEnv();
const api = await startTestApi({ env });
const [n1, n2] = await Promise.all([spawnGateway(env), spawnGateway(env)]);
const sql = api.deps.sql;

async function lesson() {
  const p = await partnerFactory(sql);
  const id = (await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Controls' } })).body.id as string;
  const link = async (userId: string, role: 'teacher' | 'student' = 'student') =>
    (await api.request('POST', `/lessons/${id}/links`, { key: p.apiKey, body: { user: { id: userId, name: userId, role } } })).body as { id: string; person: string; token: string };
  return { key: p.apiKey, id, link };
}

const embed = (n: GatewayProcess, token: string) => fetch(`http://127.0.0.1:${n.port}/embed/${token}`);

/** Every client closes with 4403 (the page's "removed" card) within 2 s of `t0`; the others stay. */
async function shutOutWithin2s(gone: TestClient[], stay: TestClient[], t0: number): Promise<void> {
  for (const c of gone) {
    expect(await c.waitClosed(5000)).toBe(4403);
    expect(Date.now() - t0).toBeLessThan(2000);
  }
  for (const c of stay) expect(c.closeCode).toBeUndefined();
}

/** The token is refused at the upgrade with 403 on both nodes. */
async function refusedEverywhere(token: string): Promise<void> {
  for (const n of [n1, n2]) {
    const again = new TestClient(n.wsUrl(token));
    await again.opened.catch(() => undefined);
    expect(again.refusedStatus).toBe(403);
  }
}

describe('partner controls across two gateway processes', () => {
  it('DELETE of a link closes every socket opened with it on both nodes within 2 s and refuses it after; other links stay', async () => {
    const l = await lesson();
    const teacher = await l.link('t', 'teacher');
    const student = await l.link('s');
    const t = await join(n1.wsUrl(teacher.token));
    const s1 = await join(n1.wsUrl(student.token));
    const s2 = await join(n2.wsUrl(student.token));

    const t0 = Date.now();
    const res = await api.request('DELETE', `/lessons/${l.id}/links/${student.id}`, { key: l.key });
    expect(res.status).toBe(204);
    await shutOutWithin2s([s1, s2], [t], t0);
    await refusedEverywhere(student.token);
    for (const n of [n1, n2]) {
      const page = await embed(n, student.token);
      expect(page.status).toBe(403); // the page's "removed" card (realtime/features/page: a 403 refusal with code removed)
      expect(await page.text()).toContain('You were removed from the lesson');
    }
    const listed = (await api.request('GET', `/lessons/${l.id}/links`, { key: l.key })).body;
    expect(listed.find((x: any) => x.id === student.id).revoked_at).toEqual(expect.any(String));
    expect(listed.find((x: any) => x.id === teacher.id).revoked_at).toBeNull();
    // a new link for the same person works: revoking names a link, not the person
    const fresh = await join(n2.wsUrl((await l.link('s')).token));
    await Promise.all([t.close(), fresh.close()]);
  }, 30_000);

  it('POST .../participants/{person}/remove closes all their sockets on both nodes within 2 s and refuses all their links issued until then', async () => {
    const l = await lesson();
    const teacher = await l.link('t', 'teacher');
    const a = await l.link('pupil');
    const b = await l.link('pupil'); // a second link for the same person
    const t = await join(n2.wsUrl(teacher.token));
    const s1 = await join(n1.wsUrl(a.token));
    const s2 = await join(n2.wsUrl(b.token));
    expect(a.person).toBe(b.person);

    const t0 = Date.now();
    const res = await api.request('POST', `/lessons/${l.id}/participants/${a.person}/remove`, { key: l.key });
    expect(res.status).toBe(204);
    await shutOutWithin2s([s1, s2], [t], t0);
    for (const token of [a.token, b.token]) await refusedEverywhere(token);
    expect((await embed(n1, a.token)).status).toBe(403);
    // the partner decides: a link issued after the removal lets them back in
    const back = await join(n1.wsUrl((await l.link('pupil')).token));
    await Promise.all([t.close(), back.close()]);
  }, 30_000);
});
