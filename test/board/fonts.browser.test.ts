import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { typeText } from './actions.js';
import { startProxy } from './proxy.js';
import { ARTIFACTS, startSession } from './session.js';

/**
 * A text is measured with the font it is drawn in, whatever the network does
 * after the page loaded (docs/board.md, "Fonts"). Excalidraw on its own fetches
 * its hand-drawn font only when someone first types: with the network down at
 * that moment the text would be measured in a fallback font, stored ~15 % too
 * narrow, and everyone would see it cut off ("The quick brown fox jun"), for good.
 * The student reaches the gateway through a TCP proxy that the test cuts; the
 * teacher does not.
 */
const s = await startSession();
const proxy = await startProxy(s.gw.port);

const TEXT = 'The quick brown fox jumps';

describe('texts and fonts', () => {
  it('stores a text typed while the network is down as wide as its font draws it', async () => {
    const { lesson, teacher, student } = await s.lesson();
    const a = await s.open(teacher.url);
    const b = await s.open(student.url.replace(s.origin, `http://127.0.0.1:${proxy.port}`));
    // the student looks at the board for a moment, then the network goes, and he types his first text
    await new Promise((r) => setTimeout(r, 2000));
    proxy.cut(5000);
    await b.locator('[data-testid=connection]:not([data-state=open])').waitFor();
    await typeText(b, [300, 300], TEXT);
    await b.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 30_000 });

    await expect.poll(async () => (await s.snapshot(lesson.id)).elements.length, { timeout: 10_000 }).toBe(1);
    const stored = (await s.snapshot(lesson.id)).elements[0] as unknown as { type: string; width: number; font_family: string };
    expect(stored.type).toBe('text');
    expect(stored.font_family).toBe('hand');
    // the width Excalifont gives the text at the editor's 20 px, measured on the teacher's page
    const drawn = await a.evaluate(async (text) => {
      await document.fonts.load('20px Excalifont', text);
      const ctx = document.createElement('canvas').getContext('2d')!;
      ctx.font = '20px Excalifont';
      return ctx.measureText(text).width;
    }, TEXT);
    await new Promise((r) => setTimeout(r, 500));
    await a.screenshot({ path: path.join(ARTIFACTS, 'fonts-offline-text-teacher.png') });
    await b.screenshot({ path: path.join(ARTIFACTS, 'fonts-offline-text-student.png') });
    console.log(`text typed offline: stored width ${stored.width.toFixed(1)}, Excalifont draws it ${drawn.toFixed(1)} wide`);
    expect(Math.abs(stored.width - drawn)).toBeLessThan(2);
    expect(a.errors).toEqual([]);
    await a.context().close();
    await b.context().close();
  }, 90_000);
});
