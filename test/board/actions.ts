import type { Page } from 'playwright-core';

/**
 * What a person does on the board page, with the mouse and keyboard, and what
 * the page shows (its `data-elements` / `data-ids`). No test framework in
 * here: the browser tests and bench/board/soak.ts share it.
 */
async function canvasBox(page: Page) {
  return (await page.locator('[data-testid=board] canvas').last().boundingBox())!;
}

/** Draws a freehand stroke with the mouse, `points` moves long, starting at `from` (canvas coordinates); `lift: false` leaves the pen down. */
export async function drawStroke(page: Page, from: [number, number], dx: number, points = 20, opts: { lift?: boolean } = {}) {
  await page.locator('[data-testid="toolbar-freedraw"]').click({ force: true });
  const box = await canvasBox(page);
  await page.mouse.move(box.x + from[0], box.y + from[1]);
  await page.mouse.down();
  for (let i = 1; i <= points; i++) await page.mouse.move(box.x + from[0] + (dx * i) / points, box.y + from[1] + Math.sin(i / 3) * 30);
  if (opts.lift !== false) await page.mouse.up();
}

/** Types a text with the text tool at a canvas point: waits for the editor to open before typing and to close after Escape. */
export async function typeText(page: Page, at: [number, number], text: string) {
  await page.locator('[data-testid="toolbar-text"]').click({ force: true });
  const box = await canvasBox(page);
  await page.mouse.click(box.x + at[0], box.y + at[1]);
  // type only once the text editor is open (on a loaded machine the first keys could come before it)
  await page.locator('textarea.excalidraw-wysiwyg').waitFor();
  await page.keyboard.type(text);
  await page.keyboard.press('Escape');
  await page.locator('textarea.excalidraw-wysiwyg').waitFor({ state: 'detached' });
}

/** Types a label into the shape whose box is [x, y, w, h] (a double-click in its middle), and closes the text editor. */
export async function typeLabel(page: Page, [x, y, w, h]: [number, number, number, number], text: string) {
  const box = await canvasBox(page);
  await page.mouse.dblclick(box.x + x + w / 2, box.y + y + h / 2);
  await page.locator('textarea.excalidraw-wysiwyg').waitFor();
  await page.keyboard.type(text);
  await page.keyboard.press('Escape');
  await page.locator('textarea.excalidraw-wysiwyg').waitFor({ state: 'detached' });
}

/** Draws a rectangle by dragging; the editor selects it afterwards. */
export async function drawRect(page: Page, from: [number, number], size: [number, number]) {
  await page.locator('[data-testid="toolbar-rectangle"]').click({ force: true });
  const box = await canvasBox(page);
  await page.mouse.move(box.x + from[0], box.y + from[1]);
  await page.mouse.down();
  await page.mouse.move(box.x + from[0] + size[0] / 2, box.y + from[1] + size[1] / 2, { steps: 3 });
  await page.mouse.move(box.x + from[0] + size[0], box.y + from[1] + size[1], { steps: 3 });
  await page.mouse.up();
}

/** Clicks at a canvas point with the selection tool (selects what is there). */
export async function clickAt(page: Page, at: [number, number]) {
  await page.locator('[data-testid="toolbar-selection"]').click({ force: true });
  const box = await canvasBox(page);
  await page.mouse.click(box.x + at[0], box.y + at[1]);
}

/** Elements the page's editor shows (not deleted) on its current page. */
export const shown = async (page: Page) => Number(await page.locator('[data-testid=board]').getAttribute('data-elements'));

/** Waits until the page shows exactly `n` elements. */
export const showsExactly = (page: Page, n: number, timeout = 15_000) =>
  page.waitForFunction((k) => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) === k, n, { timeout });

/** Goes to the i-th page tab. */
export async function goToPage(page: Page, i: number) {
  await page.locator(`[data-testid=page-tab-${i}]`).click();
  await page.locator(`[data-testid=page-tab-${i}].current`).waitFor();
}

/** Ids of the elements the page's editor shows on its current page, sorted. */
export const shownIds = async (page: Page) => ((await page.locator('[data-testid=board]').getAttribute('data-ids')) ?? '').split(' ').filter(Boolean).sort();

/** Dark pixels the board's canvas shows (strokes are #1e1e1e; the generic board has no grid): is a drawing in view? */
export const ink = (page: Page) =>
  page.evaluate(() => {
    const c = document.querySelector<HTMLCanvasElement>('[data-testid=board] canvas.static')!;
    const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] < 80 && d[i + 1] < 80 && d[i + 2] < 80 && d[i + 3] > 200) n++;
    return n;
  });

/** Dark pixels (strokes and text, #1e1e1e) the board's canvas shows inside a box of canvas coordinates [x0, y0, x1, y1]. */
export const inkIn = (page: Page, box: [number, number, number, number]) =>
  page.evaluate(([x0, y0, x1, y1]) => {
    const c = document.querySelector<HTMLCanvasElement>('[data-testid=board] canvas.static')!;
    const k = c.width / c.clientWidth;
    const w = Math.round((x1 - x0) * k);
    const h = Math.round((y1 - y0) * k);
    const d = c.getContext('2d')!.getImageData(Math.round(x0 * k), Math.round(y0 * k), w, h).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] < 80 && d[i + 1] < 80 && d[i + 2] < 80 && d[i + 3] > 200) n++;
    return n;
  }, box);

/** Drags with the selection tool from one canvas point to another (moves what is there). */
export async function dragFrom(page: Page, from: [number, number], to: [number, number]) {
  await page.locator('[data-testid="toolbar-selection"]').click({ force: true });
  const box = await canvasBox(page);
  await page.mouse.move(box.x + from[0], box.y + from[1]);
  await page.mouse.down();
  await page.mouse.move(box.x + (from[0] + to[0]) / 2, box.y + (from[1] + to[1]) / 2, { steps: 5 });
  await page.mouse.move(box.x + to[0], box.y + to[1], { steps: 5 });
  await page.mouse.up();
}

/**
 * `from` draws a small rectangle on the page it shows, and `to` shows it: whatever `from`'s page sent
 * before has been handled and relayed too (one socket, in order). What a test checks after it cannot
 * pass only because something was still on its way. Returns the rectangle's id.
 */
export async function laterDrawing(from: Page, to: Page, at: [number, number] = [620, 120]): Promise<string> {
  const before = await shownIds(from);
  await drawRect(from, at, [60, 40]);
  await from.keyboard.press('Escape');
  const ids = `(document.querySelector('[data-testid=board]')?.getAttribute('data-ids') ?? '').split(' ')`;
  const marker = (await (await from.waitForFunction(`${ids}.find((id) => id && !${JSON.stringify(before)}.includes(id))`, undefined, { timeout: 10_000 })).jsonValue()) as string;
  await to.waitForFunction(`${ids}.includes(${JSON.stringify(marker)})`, undefined, { timeout: 10_000 });
  return marker;
}
