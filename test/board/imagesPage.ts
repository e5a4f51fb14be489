import type { Page } from 'playwright-core';
import sharp from 'sharp';
import type { PageStack } from './browser.js';

/**
 * What the image tests look at and do on a board page (no test framework in here): pixels of the
 * board's canvas, a paste of an image file, a small picture of one colour.
 */

/** Pixels of the board's canvas within `tol` of a colour. */
export const pixelsOf = (page: Page, [r, g, b]: [number, number, number], tol = 40) =>
  page.evaluate(
    ([r, g, b, tol]) => {
      const c = document.querySelector<HTMLCanvasElement>('[data-testid=board] canvas.static')!;
      const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - r) < tol && Math.abs(d[i + 1] - g) < tol && Math.abs(d[i + 2] - b) < tol) n++;
      return n;
    },
    [r, g, b, tol],
  );

/** Saturated pixels (a photo's colours; the editor's placeholder and the board are grey and white). */
export const colourful = (page: Page) =>
  page.evaluate(() => {
    const c = document.querySelector<HTMLCanvasElement>('[data-testid=board] canvas.static')!;
    const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) n++;
    return n;
  });

/**
 * `waitFor(what, f)` polls `f` until it holds; on time out every page of the stack's browser is
 * screenshot (`<prefix>-failed-<width>.png`) and the test fails naming `what`.
 */
export const waiter =
  (stack: PageStack, prefix: string) =>
  async (what: string, f: () => Promise<boolean>, ms = 20_000): Promise<void> => {
    const end = Date.now() + ms;
    while (!(await f())) {
      if (Date.now() > end) {
        for (const p of stack.browser().contexts().flatMap((c) => c.pages())) await stack.shot(p, `${prefix}-failed-${p.viewportSize()?.width}`).catch(() => undefined);
        throw new Error(`not in time: ${what}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };

export const MAGENTA: [number, number, number] = [255, 0, 255];
export const magentaPng = () => sharp({ create: { width: 300, height: 200, channels: 3, background: { r: 255, g: 0, b: 255 } } }).png().toBuffer();

/** A paste of an image file, as the clipboard gives one after "Copy image". */
export async function paste(page: Page, bytes: Buffer, type = 'image/png') {
  await page.evaluate(
    ([b64, type]) => {
      const dt = new DataTransfer();
      dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], 'pasted.png', { type }));
      document.querySelector('.excalidraw')!.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
    },
    [bytes.toString('base64'), type],
  );
}
