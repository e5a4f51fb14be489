import { describe, expect, it } from 'vitest';
import { startTestApi } from '../helpers/api.js';
import { startPageStack, type Watched } from './browser.js';

/**
 * What a partner does from its own admin tools, seen in the participants' pages: Chromium against
 * the real gateway, the partner's calls through the real partner API on the same database and Redis.
 */
const stack = await startPageStack();
const api = await startTestApi({ env: stack.gw.env });

/** A lesson made and its links issued through the partner API, as a partner does. */
async function lessonByApi(title: string) {
  const key = stack.partner().apiKey;
  const created = await api.request('POST', '/lessons', { key, body: { title, mode: 'board_only', subject_mode: 'generic' } });
  expect(created.status).toBe(201);
  const id: string = created.body.id;
  const link = async (userId: string, name: string, role: 'teacher' | 'student') => {
    const res = await api.request('POST', `/lessons/${id}/links`, { key, body: { user: { id: userId, name, role } } });
    expect(res.status).toBe(201);
    return { id: res.body.id as string, url: `${stack.origin}/embed/${res.body.token as string}` };
  };
  return { id, key, teacher: await link('t1', 'Anna Petrova', 'teacher'), student: await link('s1', 'Boris', 'student') };
}

/** When (the page's clock, the machine's) `predicate` first held, checked every 20 ms. */
const seenAt = async (page: Watched, predicate: string): Promise<number> =>
  (await page.waitForFunction(`(${predicate}) ? Date.now() : 0`, null, { polling: 20, timeout: 15_000 })).jsonValue() as Promise<number>;

describe("the partner's controls, in the participants' pages", () => {
  it('a participant whose link the partner revokes sees the "removed" card within 2 s, and the link no longer opens the lesson', async () => {
    const l = await lessonByApi('Revoking');
    const a = await stack.open(l.teacher.url);
    const b = await stack.open(l.student.url);
    await a.waitForFunction(() => document.querySelectorAll('[data-testid=participants] li').length === 2, null, { timeout: 15_000 });

    const t0 = Date.now();
    const res = await api.request('DELETE', `/lessons/${l.id}/links/${l.student.id}`, { key: l.key });
    expect(res.status).toBe(204);
    const shown = await seenAt(b, `document.querySelector('[data-testid=ended]')?.textContent?.includes('You were removed from the lesson')`);
    expect(shown - t0).toBeLessThan(2000);
    await stack.shot(b, 'link-revoked-by-partner');
    // the teacher stays, and sees the student leave
    await a.waitForFunction(() => document.querySelectorAll('[data-testid=participants] li').length === 1, null, { timeout: 15_000 });
    expect(await a.locator('[data-testid=connection]').getAttribute('data-state')).toBe('open');
    // the link opens the removed page from now on
    const again = await b.goto(l.student.url);
    expect(again?.status()).toBe(403);
    await b.getByRole('heading', { name: 'You were removed from the lesson' }).waitFor();
    await Promise.all([a.context().close(), b.context().close()]);
  }, 120_000);

  it('PATCH /lessons/{id} shows the new title and toolset in every open page at once', async () => {
    const l = await lessonByApi('Algebra: quadratic equatoins');
    const a = await stack.open(l.teacher.url);
    const b = await stack.open(l.student.url);
    await a.getByRole('heading', { name: 'Algebra: quadratic equatoins' }).waitFor();
    expect(await a.locator('[data-testid=tool-formula]').count()).toBe(0);

    const t0 = Date.now();
    const res = await api.request('PATCH', `/lessons/${l.id}`, { key: l.key, body: { title: 'Algebra: quadratic equations', subject_mode: 'math' } });
    expect(res.status).toBe(200);
    for (const page of [a, b]) {
      const shown = await seenAt(page, `[...document.querySelectorAll('h1')].some((h) => h.textContent === 'Algebra: quadratic equations')`);
      expect(shown - t0).toBeLessThan(2000);
      await page.getByText('Maths board').waitFor({ timeout: 5_000 });
      await page.locator('[data-testid=tool-formula]').waitFor({ timeout: 5_000 });
      // without a reload: the same connection
      expect(await page.locator('[data-testid=connection]').getAttribute('data-state')).toBe('open');
    }
    await stack.shot(b, 'lesson-renamed-by-partner');
    expect([...a.errors, ...b.errors].filter((e) => !/WebSocket/.test(e))).toEqual([]);
    await Promise.all([a.context().close(), b.context().close()]);
  }, 120_000);
});
