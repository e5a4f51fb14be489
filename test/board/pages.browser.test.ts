import { describe, expect, it } from 'vitest';
import { suiteOrFull } from '../helpers/length.js';
import { drawRect, goToPage, laterDrawing, showsExactly } from './actions.js';
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
const shownOn = async (page: Watched) => Number(await page.locator('[data-testid=board]').getAttribute('data-elements'));
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

  /** Every notice the page shows, in order (a notice replaces the one before on screen). */
  const recordToasts = (page: Watched) =>
    page.evaluate(() => {
      const seen: string[] = ((window as unknown as { toasts: string[] }).toasts = []);
      new MutationObserver(() => {
        const t = document.querySelector('.toast')?.textContent;
        if (t && seen.at(-1) !== t) seen.push(t);
      }).observe(document.body, { childList: true, subtree: true, characterData: true });
    });
  const toasts = (page: Watched) => page.evaluate(() => (window as unknown as { toasts: string[] }).toasts);

  /** A slow freehand stroke with the mouse; `midway` runs with the pen down, halfway through. */
  async function strokeWith(page: Watched, from: [number, number], midway: () => Promise<void>) {
    await page.locator('[data-testid="toolbar-freedraw"]').click({ force: true });
    const box = (await page.locator('[data-testid=board] canvas').last().boundingBox())!;
    await page.mouse.move(box.x + from[0], box.y + from[1]);
    await page.mouse.down();
    for (let i = 1; i <= 30; i++) {
      await page.mouse.move(box.x + from[0] + i * 12, box.y + from[1] + Math.sin(i / 2) * 30);
      await new Promise((r) => setTimeout(r, 40));
      if (i === 15) await midway();
    }
    await page.mouse.up();
  }

  it('never saves a stroke on a page it was not drawn on: a pin or a delete under the pen drops it, with a plain notice', async () => {
    // a few times at full length (npm run test:full): where the pin lands in the stroke's life (before
    // its first send, between sends) varies; the suite runs one round
    for (let round = 0; round < suiteOrFull(1, 3); round++) {
      const { a, b } = await stack.teacherAndStudent('board_only', 'generic');
      await recordToasts(b);
      await addPage(b, 1);
      await drawRect(b, [300, 150], [120, 80]);
      await b.keyboard.press('Escape');
      await showsExactly(a, 0); // the teacher stays on Page 1
      await strokeWith(b, [300, 400], async () => {
        await a.locator('[data-testid=pin]').click(); // Page 1, while the student's pen is down on Page 2
        await b.locator('[data-testid=page-tab-0].current.pinned').waitFor({ timeout: 10_000 });
      });
      await b.locator('.toast', { hasText: 'The teacher pinned another page while you were drawing there: that drawing was not kept.' }).waitFor({ timeout: 10_000 });
      // not on the pinned page: neither screen shows it there, only the student's later rectangle
      await laterDrawing(b, a);
      expect(await shownOn(a)).toBe(1);
      expect(await shownOn(b)).toBe(1);
      // and not on Page 2 either (refused there by the pin): the rectangle alone
      await a.locator('[data-testid=unpin]').click();
      await b.waitForFunction(() => !(document.querySelector('[data-testid=page-tab-1]') as HTMLButtonElement).disabled);
      await goToPage(b, 1);
      await showsExactly(b, 1);
      await goToPage(a, 1);
      await showsExactly(a, 1);
      expect(await toasts(b)).toEqual(['The teacher pinned another page while you were drawing there: that drawing was not kept.']);

      // the teacher deletes the page under the student's pen
      await strokeWith(b, [300, 400], async () => {
        await a.getByRole('button', { name: 'Delete page Page 2' }).click(); // the dialog is accepted
        await b.locator('[data-testid=page-tab-1]').waitFor({ state: 'detached', timeout: 10_000 });
      });
      await b.locator('.toast', { hasText: 'The page you were drawing on was deleted: that drawing was not kept.' }).waitFor({ timeout: 10_000 });
      await laterDrawing(b, a);
      expect(await shownOn(a)).toBe(2);
      expect(await shownOn(b)).toBe(2);
      expect((await toasts(b)).slice(1)).toEqual(['The teacher deleted "Page 2", the page you were on.', 'The page you were drawing on was deleted: that drawing was not kept.']);
      await a.context().close();
      await b.context().close();
    }
  }, 180_000);
});
