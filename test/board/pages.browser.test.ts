import { describe, expect, it } from 'vitest';
import { drawRect, showsExactly } from './actions.js';
import { startPageStack, type Watched } from './browser.js';

/**
 * Pages as people use them (docs/board.md, "Pages"): the names new tabs get,
 * the page a reload comes back to, what a person is told when their page goes
 * away, and where a stroke in progress ends up when the page changes under the
 * pen. Chromium against the real gateway; only the mouse, the keyboard and
 * what the page shows.
 */
const stack = await startPageStack();

const tabNames = (page: Watched) => page.locator('.page-tab').allInnerTexts();
const reload = async (page: Watched) => {
  await page.reload();
  await page.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 30_000 });
};
const current = (page: Watched) => page.locator('.page-tab[aria-current=page]').innerText();
const addPage = async (page: Watched, tabs: number) => {
  await page.getByRole('button', { name: 'Add page' }).click();
  await page.locator(`[data-testid=page-tab-${tabs}][aria-current=page]`).waitFor();
};

describe('pages', () => {
  it('names a new page with a number no tab has, after a deletion and when two people add one at once', async () => {
    const { a, b } = await stack.teacherAndStudent('board_only', 'generic');
    await addPage(a, 1);
    await addPage(a, 2);
    await a.locator('[data-testid=page-tab-1]').click();
    await a.getByRole('button', { name: 'Delete page Page 2' }).click(); // the dialog is accepted
    await a.locator('[data-testid=page-tab-2]').waitFor({ state: 'detached' });
    await addPage(a, 2);
    expect(await tabNames(a)).toEqual(['Page 1', 'Page 3', 'Page 4']);
    // both press "+" at the same moment, with the same three tabs on screen
    await expect.poll(() => tabNames(b)).toEqual(['Page 1', 'Page 3', 'Page 4']);
    // (a click each, at one instant of the machine's clock: two playwright clicks in a row are
    // far enough apart that the second page already shows the first one's tab)
    const at = Date.now() + 300;
    const press = (page: Watched) => page.evaluate((t) => setTimeout(() => document.querySelector<HTMLButtonElement>('.page-add')!.click(), t - Date.now()), at);
    await Promise.all([press(a), press(b)]);
    for (const page of [a, b]) await page.locator('[data-testid=page-tab-4]').waitFor();
    const names = await tabNames(a);
    expect(new Set(names).size, names.join(', ')).toBe(5);
    expect(names.slice(3).sort()).toEqual(['Page 5', 'Page 6']);
    expect(await tabNames(b)).toEqual(names);
    await a.context().close();
    await b.context().close();
  }, 90_000);

  it('brings a person back to the page they were on after a reload, unless the teacher pinned another', async () => {
    const { a, b } = await stack.teacherAndStudent('board_only', 'generic');
    await addPage(b, 1);
    await addPage(b, 2);
    await drawRect(b, [300, 200], [160, 100]);
    await showsExactly(b, 1);
    await reload(b);
    expect(await current(b)).toBe('Page 3');
    await showsExactly(b, 1); // their drawing, not an empty first page
    // the pin wins over the page a reload remembers
    await a.locator('[data-testid=page-tab-1]').click();
    await a.locator('[data-testid=pin]').click();
    await b.locator('[data-testid=page-tab-1].current.pinned').waitFor({ timeout: 10_000 });
    await reload(b);
    expect(await current(b)).toBe('Page 2');
    await a.locator('[data-testid=unpin]').click();
    await b.waitForFunction(() => !(document.querySelector('[data-testid=page-tab-0]') as HTMLButtonElement).disabled);
    await b.locator('[data-testid=page-tab-2]').click();
    await reload(b);
    expect(await current(b)).toBe('Page 3');
    // the teacher too, and each tab keeps its own
    await reload(a);
    expect(await current(a)).toBe('Page 2');
    await a.context().close();
    await b.context().close();
  }, 90_000);

  it("tells a person that the page they were on was deleted, live and when they come back to it", async () => {
    const { a, b } = await stack.teacherAndStudent('board_only', 'generic');
    await addPage(a, 1);
    await addPage(a, 2);
    await b.locator('[data-testid=page-tab-1]').click();
    await b.locator('[data-testid=page-tab-1][aria-current=page]').waitFor();
    await a.locator('[data-testid=page-tab-1]').click();
    await a.getByRole('button', { name: 'Delete page Page 2' }).click(); // the dialog is accepted
    await b.locator('.toast', { hasText: 'The teacher deleted "Page 2", the page you were on.' }).waitFor({ timeout: 10_000 });
    expect(await current(b)).toBe('Page 1');
    await stack.shot(b, 'page-deleted-notice');
    // the teacher, who deleted it, is not told
    expect(await a.locator('.toast').count()).toBe(0);
    // away from the lesson (the tab on another site) while the page is deleted, then back in the same tab
    await b.locator('[data-testid=page-tab-1]').click(); // Page 3
    await b.locator('[data-testid=page-tab-1][aria-current=page]').waitFor();
    const url = b.url();
    await b.goto('about:blank');
    await a.locator('[data-testid=page-tab-1]').click();
    await a.getByRole('button', { name: 'Delete page Page 3' }).click();
    await a.locator('[data-testid=page-tab-1]').waitFor({ state: 'detached' });
    await b.goto(url);
    await b.locator('.toast', { hasText: 'The page you were on was deleted.' }).waitFor({ timeout: 30_000 });
    expect(await current(b)).toBe('Page 1');
    await a.context().close();
    await b.context().close();
  }, 90_000);
});
