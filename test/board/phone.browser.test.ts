import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { suiteOrFull } from '../helpers/length.js';
import { drawRect, goToPage, ink, showsExactly } from './actions.js';
import { LAPTOP, PHONE, startPageStack } from './browser.js';

/**
 * The lesson on a phone: 390 x 844 with touch, as an
 * iPhone 12-14 shows it: the chat history readable, no sideways scrolling,
 * new formulas placed where they cover nothing. Screenshots:
 * test-artifacts/phone-*.png.
 */
const stack = await startPageStack();

type Rect = { x: number; y: number; width: number; height: number };
const rectOf = (page: Page, selector: string) => page.locator(selector).first().boundingBox() as Promise<Rect>;
const within = (r: Rect, w: number, h: number) => r.x >= 0 && r.y >= 0 && r.x + r.width <= w + 0.5 && r.y + r.height <= h + 0.5;
const overlap = (a: Rect, b: Rect) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

describe('the lesson page on a phone', () => {
  it('shows a late joiner what was drawn beyond a phone screen, on each page it goes to', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const teacher = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'));
    // on a laptop, right of and below everything a phone shows
    await drawRect(teacher, [650, 450], [200, 150]);
    await teacher.getByRole('button', { name: 'Add page' }).click();
    await teacher.locator('[data-testid=page-tab-1][aria-current=page]').waitFor();
    await drawRect(teacher, [700, 120], [180, 100]);
    await showsExactly(teacher, 1);
    const page = await stack.open(await l.url('s1', 'Boris', 'student'), PHONE);
    await showsExactly(page, 1);
    await expect.poll(() => ink(page), { timeout: 5_000 }).toBeGreaterThan(200);
    await stack.shot(page, 'phone-late-joiner');
    await goToPage(page, 1);
    await expect.poll(() => ink(page), { timeout: 5_000 }).toBeGreaterThan(200);
    await stack.shot(page, 'phone-late-joiner-page-2');
    expect(page.errors).toEqual([]);
    await page.context().close();
    await teacher.context().close();
  }, 120_000);

  it('has no sideways scroll, a readable chat, and the toolbar and subject tools within reach', async () => {
    const l = await stack.lesson('full', 'physics');
    const teacher = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'));
    const page = await stack.open(await l.url('s1', 'Boris', 'student'), PHONE);
    for (const text of ['Hello Boris, can you see the board?', 'Draw the forces on the block, please.', 'We start with gravity.']) {
      await teacher.getByLabel('Message').fill(text);
      await teacher.getByRole('button', { name: 'Send', exact: true }).click();
    }
    // the panel is closed: the board takes most of the screen, and the new lines are announced on it
    await expect.poll(() => page.locator('[data-testid=unread]').textContent()).toBe('3');
    await page.getByTestId('chat-peek').getByText('We start with gravity.').waitFor();
    const board = await rectOf(page, '[data-testid=board]');
    expect(board.height, 'drawing area with the panel closed').toBeGreaterThanOrEqual(844 * 0.6);
    expect(within(board, 390, 844)).toBe(true);
    await stack.shot(page, 'phone-panel-closed');
    await page.getByTestId('panel-toggle').tap();
    await page.locator('[data-testid=chat]').getByText('We start with gravity.').waitFor();
    await page.locator('[data-testid=unread]').waitFor({ state: 'detached' });
    await stack.shot(page, 'phone-lesson');
    // everyone in the panel on screen: nobody cut off at the right edge
    for (const li of await page.locator('[data-testid=participants] li').all()) expect(within((await li.boundingBox())!, 390, 844)).toBe(true);

    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    expect(await page.evaluate(() => document.body.scrollWidth)).toBeLessThanOrEqual(390);
    // the chat: several lines visible at once
    const chat = await rectOf(page, '[data-testid=chat]');
    expect(chat.height).toBeGreaterThanOrEqual(120);
    expect(within(chat, 390, 844)).toBe(true);
    await expect.poll(() => page.getByText('Hello Boris, can you see the board?').isVisible()).toBe(true);
    // the message box and Send fit on the screen
    expect(within(await rectOf(page, 'input[aria-label=Message]'), 390, 844)).toBe(true);
    expect(within(await rectOf(page, '.chat form button'), 390, 844)).toBe(true);

    await page.getByTestId('panel-toggle').tap();
    await page.locator('[data-testid=chat]').waitFor({ state: 'hidden' });
    // Excalidraw's toolbar and our subject tools: on screen, and they work with a tap
    const pen = await rectOf(page, '[data-testid="toolbar-freedraw"]');
    expect(within(pen, 390, 844)).toBe(true);
    for (const tool of ['[data-testid=tool-formula]', '[data-testid=tool-vector]']) expect(within(await rectOf(page, tool), 390, 844), tool).toBe(true);
    await page.locator('[data-testid=tool-vector]').tap();
    const dialog = page.getByRole('dialog', { name: 'Vector' });
    await dialog.waitFor();
    expect(within((await dialog.boundingBox())!, 390, 844)).toBe(true);
    await stack.shot(page, 'phone-vector-dialog');
    await dialog.getByLabel('Magnitude').fill('9.8');
    await dialog.getByRole('button', { name: 'Insert' }).tap();
    await page.waitForFunction(() => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) === 1);
    await teacher.waitForFunction(() => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) === 1);
    await stack.shot(page, 'phone-vector');
    expect(page.errors).toEqual([]);
    await page.context().close();
    await teacher.context().close();
  }, 120_000);

  it('places each new formula where it covers nothing already on the board', async () => {
    const l = await stack.lesson('board_only', 'math');
    const page = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'), PHONE);
    // a stroke right across the middle of the board, where a formula placed blindly would land
    const canvas = await rectOf(page, '[data-testid=board]');
    const mid = { x: canvas.x + canvas.width / 2, y: canvas.y + canvas.height / 2 };
    await page.locator('label:has([data-testid="toolbar-freedraw"])').tap(); // the icon over the radio
    await page.mouse.move(mid.x - 80, mid.y - 20);
    await page.mouse.down();
    for (let i = 1; i <= 16; i++) await page.mouse.move(mid.x - 80 + i * 10, mid.y - 20 + (i % 2) * 40, { steps: 2 });
    await page.mouse.up();
    const stroke: Rect = { x: mid.x - 82, y: mid.y - 22, width: 164, height: 44 };
    await page.waitForFunction(() => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) === 1);

    // Excalidraw's toolbars, which would hide a formula under them
    const bars = () =>
      page.evaluate(() =>
        [document.querySelector('[data-testid=toolbar-freedraw]')?.closest('.Island'), document.querySelector('.App-bottom-bar .Island')].map((e) => e!.getBoundingClientRect().toJSON() as Rect),
      );
    const formulaBoxes = () => page.locator('.overlay-formula').evaluateAll((els) => els.map((e) => e.getBoundingClientRect().toJSON() as Rect));
    const insert = async (latex: string, n: number) => {
      await page.locator('[data-testid=tool-formula]').tap();
      const dialog = page.getByRole('dialog', { name: 'Formula' });
      await dialog.locator('textarea').fill(latex);
      await dialog.getByRole('button', { name: 'Insert' }).tap();
      await page.waitForFunction((k) => document.querySelectorAll('.overlay-formula .katex').length === k, n);
      await page.keyboard.press('Escape');
      const boxes = await formulaBoxes();
      const last = boxes[n - 1];
      // the new one is where the person sees it: on screen, under no toolbar, over no other formula
      expect(within(last, 390, 844), `formula ${n} is on screen`).toBe(true);
      for (const bar of await bars()) expect(overlap(last, bar), `formula ${n} is under a toolbar`).toBe(false);
      for (const other of boxes.slice(0, n - 1)) expect(overlap(last, other), `formula ${n} covers another`).toBe(false);
      return last;
    };
    // the first two fit in the view: beside the stroke, not on it
    expect(overlap(await insert('E = mc^2', 1), stroke), 'formula 1 covers the stroke').toBe(false);
    expect(overlap(await insert('a^2 + b^2 = c^2', 2), stroke), 'formula 2 covers the stroke').toBe(false);
    await stack.shot(page, 'phone-formulas');
    // a phone's view is soon full: the next goes below everything and the board scrolls to it
    await insert('x = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}', 3);
    await insert('\\int_0^1 x^2\\,dx = \\frac{1}{3}', 4);
    await stack.shot(page, 'phone-formulas-scrolled');
    await page.context().close();
  }, 120_000);

  // A short, wide window got the stacked phone layout (by width alone): at 800 x 500 about 100 px of
  // board were left between Excalidraw's toolbars and the chat showed no line. Each size below is a
  // window a lesson is opened in: a small laptop window, a phone on its side, a netbook. The call is
  // on (a `full` lesson), so its tiles take their room in the panel too.
  // The suite takes one laptop window and one phone on its side; `npm run test:full` all four.
  const sizes = [[800, 500, false, 'math'], [844, 390, true, 'generic'], [740, 360, true, 'physics'], [1024, 600, false, 'generic']] as const;
  for (const [width, height, phone, subject] of suiteOrFull(sizes.slice(0, 2), sizes)) {
    it(`leaves room to draw and to read the chat in a short, wide window (${width} x ${height}, ${subject})`, async () => {
      const l = await stack.lesson('full', subject);
      const teacher = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'));
      const options = phone ? { ...PHONE, viewport: { width, height } } : { ...LAPTOP, viewport: { width, height } };
      const page = await stack.open(await l.url('s1', 'Boris', 'student'), options);
      const lines = ['Hello Boris, can you see the board?', 'Draw the forces on the block, please.', 'We start with gravity.'];
      for (const text of lines) {
        await teacher.getByLabel('Message').fill(text);
        await teacher.getByRole('button', { name: 'Send', exact: true }).click();
      }
      await page.getByText(lines[2]).waitFor();
      await stack.shot(page, `short-${width}x${height}`);

      // nothing off screen, no scrolling of the page itself
      expect(await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight])).toEqual([width, height]);
      // the board: most of the window's height, and at least half its width
      const board = await rectOf(page, '[data-testid=board]');
      expect(board.height, 'board height').toBeGreaterThanOrEqual(height * 0.7);
      expect(board.width, 'board width').toBeGreaterThanOrEqual(width * 0.5);
      // the chat: the newest lines on screen, and its input
      const chat = await rectOf(page, '[data-testid=chat]');
      expect(within(chat, width, height)).toBe(true);
      for (const text of lines.slice(1)) {
        const line = (await page.getByText(text).boundingBox())!;
        expect(line.y >= chat.y && line.y + line.height <= chat.y + chat.height + 0.5, `"${text}" is in view`).toBe(true);
      }
      expect(within(await rectOf(page, 'input[aria-label=Message]'), width, height)).toBe(true);
      expect(within(await rectOf(page, '.chat form button'), width, height), 'Send on screen').toBe(true);
      // the subject tools on the board, clear of Excalidraw's toolbar
      if (subject !== 'generic') {
        const tool = await rectOf(page, '[data-testid=tool-formula]');
        expect(within(tool, width, height) && tool.x + tool.width <= board.x + board.width, 'formula button on the board').toBe(true);
        const toolbar = await page.locator('[data-testid="toolbar-rectangle"]').evaluate((e) => e.closest('.Island')!.getBoundingClientRect().toJSON() as Rect);
        expect(overlap(tool, toolbar), 'formula button under the toolbar').toBe(false);
      }
      // and drawing works there
      await drawRect(page, [Math.round(board.width / 2) - 60, Math.round(board.height / 2) - 40], [120, 80]);
      await showsExactly(teacher, 1);
      await stack.shot(page, `short-${width}x${height}-drawn`);
      expect(page.errors).toEqual([]);
      await page.context().close();
      await teacher.context().close();
    }, 120_000);
  }
});
