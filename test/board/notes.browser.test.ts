import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { BoardElement } from '../../src/board/schema.js';
import { plant } from './bombs.js';
import { ARTIFACTS, startPageStack } from './browser.js';
import { rect, text } from './factories.js';
import { parsePdf, pdfPagePng } from './pdf.js';

/**
 * "Download notes (PDF)" on the participant page, in Chromium against the real gateway: the menu
 * item fetches the board as a PDF from the gateway with the link token and saves it; the file is
 * the partner API's export (docs/board.md, "Notes as a PDF").
 */
const stack = await startPageStack();

describe('Download notes (PDF)', () => {
  it("a student's menu item downloads the whole board as a PDF: every page, its text as text, its formula typeset", { timeout: 180_000 }, async () => {
    const l = await stack.lesson('full', 'math');
    const formula = { ...rect('f1', { x: 40, y: 160, z: 'a3' }), type: 'formula', latex: 'x = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}', font_size: 28, width: 320, height: 70 } as BoardElement;
    await plant(
      stack.gw.deps.sql,
      l.lessonId,
      [text('t1', 'Quadratic equations', { x: 40, y: 40, font_size: 36, width: 420, height: 45, z: 'a1' }), rect('r1', { x: 20, y: 20, width: 480, height: 260, z: 'a2' }), formula, { ...text('t2', 'Homework: exercises 3 to 7', { z: 'a4' }), page_id: 'hw' } as BoardElement],
      [{ id: 'page-1', name: 'Lesson' }, { id: 'hw', name: 'Homework' }],
    );
    const page = await stack.open(await l.url('s1', 'Boris', 'student'));
    await page.getByTestId('main-menu-trigger').click();
    const item = page.getByTestId('download-notes');
    await item.waitFor();
    await stack.shot(page, 'notes-menu');
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: 60_000 }), item.click()]);
    expect(download.suggestedFilename()).toBe(`notes-${l.lessonId}.pdf`);
    const bytes = readFileSync((await download.path())!);
    const pdf = await parsePdf(bytes);
    expect(pdf.pages.map((pg) => pg.text)).toEqual(['Quadratic equations', 'Homework: exercises 3 to 7']);
    expect(pdf.outline).toEqual(['Lesson', 'Homework']);
    expect(pdf.pages[0].paths).toBeGreaterThan(10);
    // what the PDF looks like, drawn by PDF.js
    writeFileSync(path.join(ARTIFACTS, 'notes-pdf-page-1.png'), await pdfPagePng(bytes, 1));
    expect(page.errors).toEqual([]);
    expect(page.offOrigin).toEqual([]);
  });

  it('the gateway gives the notes only to a link of the lesson: 401 without one, 403 for another lesson', async () => {
    const l = await stack.lesson('full', 'generic');
    const other = await stack.lesson('full', 'generic');
    await plant(stack.gw.deps.sql, l.lessonId, [text('t', 'Notes')]);
    const token = (url: string) => new URL(url).pathname.split('/').pop()!;
    const none = await fetch(`${stack.origin}/notes/${l.lessonId}`);
    expect(none.status).toBe(401);
    const theirs = await fetch(`${stack.origin}/notes/${l.lessonId}`, { headers: { authorization: `Bearer ${token(await other.url('s9', 'Eve', 'student'))}` } });
    expect(theirs.status).toBe(403);
    const mine = await fetch(`${stack.origin}/notes/${l.lessonId}`, { headers: { authorization: `Bearer ${token(await l.url('s1', 'Boris', 'student'))}` } });
    expect(mine.status).toBe(200);
    expect(mine.headers.get('content-type')).toBe('application/pdf');
    const again = await fetch(`${stack.origin}/notes/${l.lessonId}`, { headers: { authorization: `Bearer ${token(await l.url('s1', 'Boris', 'student'))}`, 'if-none-match': mine.headers.get('etag')! } });
    expect(again.status).toBe(304);
  });
});
