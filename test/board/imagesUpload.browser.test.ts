import { PDFDocument, rgb } from 'pdf-lib';
import type { Route } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { startTestApi } from '../helpers/api.js';
import { showsExactly } from './actions.js';
import { startPageStack } from './browser.js';
import { MAGENTA, magentaPng, paste, pixelsOf, waiter } from './imagesPage.js';

/**
 * An image whose upload a reload interrupts, and a PDF longer than an import
 * takes, in Chromium against the real gateway and API.
 */
const stack = await startPageStack();
const api = await startTestApi({ env: stack.gw.env });
const waitFor = waiter(stack, 'images-upload');
const snapshot = async (lessonId: string) => (await api.request('GET', `/lessons/${lessonId}/snapshot`, { key: stack.partner().apiKey })).body;
const imagesOf = (snap: { elements: { type: string; status?: string; file_id?: string }[] }) => snap.elements.filter((e) => e.type === 'image');
/** the page's uploads kept for a reload (IndexedDB) */
const keptUploads = (page: import('playwright-core').Page) =>
  page.evaluate(
    () =>
      new Promise<number>((resolve) => {
        const req = indexedDB.open('board-uploads', 1);
        req.onupgradeneeded = () => req.result.createObjectStore('pending');
        req.onsuccess = () => {
          const count = req.result.transaction('pending').objectStore('pending').count();
          count.onsuccess = () => resolve(count.result);
        };
      }),
  );

/** Records every sentence the page shows (its status toasts), for `statuses`. */
function recordStatuses() {
  const seen: string[] = ((window as unknown as { statuses: string[] }).statuses = []);
  new MutationObserver(() => {
    for (const el of document.querySelectorAll('.toast[role=status]')) if (el.textContent && seen[seen.length - 1] !== el.textContent) seen.push(el.textContent);
  }).observe(document, { subtree: true, childList: true, characterData: true });
}
const statuses = (page: import('playwright-core').Page) => page.evaluate(() => (window as unknown as { statuses: string[] }).statuses);

describe('uploads and imports that do not finish as they started', () => {
  it('an upload that a reload interrupts goes again after it: the image is on the board once, for everyone', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const teacher = await stack.open(await l.url('t1', 'Anna', 'teacher'));
    const student = await stack.open(await l.url('s1', 'Boris', 'student'));
    // the student's upload never reaches the gateway before the reload (a slow phone network)
    const held: Route[] = [];
    const uploads = (url: URL) => url.pathname === `/files/${l.lessonId}`;
    await student.route(uploads, (route) => void held.push(route));
    await paste(student, await magentaPng());
    // everyone has the element, waiting for its file
    await showsExactly(teacher, 1);
    await waitFor('the pending image is stored', async () => imagesOf(await snapshot(l.lessonId)).some((e) => e.status === 'pending'));
    expect(held).toHaveLength(1);
    expect(await keptUploads(student)).toBe(1);

    await student.unroute(uploads);
    await student.reload();
    await student.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 30_000 });
    await waitFor('the teacher sees the picture', async () => (await pixelsOf(teacher, MAGENTA)) > 2_000, 60_000);
    await waitFor('the student sees it again', async () => (await pixelsOf(student, MAGENTA)) > 2_000);
    await waitFor('the image is saved', async () => imagesOf(await snapshot(l.lessonId)).every((e) => e.status === 'saved'));
    const snap = await snapshot(l.lessonId);
    expect(imagesOf(snap)).toHaveLength(1);
    expect(snap.files).toHaveLength(1);
    expect(imagesOf(snap)[0].file_id).toBe(snap.files[0].id);
    await showsExactly(teacher, 1);
    await showsExactly(student, 1);
    await waitFor('nothing is kept for another reload', async () => (await keptUploads(student)) === 0);
    await stack.shot(teacher, 'images-upload-after-reload');
    // a second reload uploads nothing more
    const posts: string[] = [];
    student.on('request', (r) => r.method() === 'POST' && r.url().includes('/files/') && posts.push(r.url()));
    await student.reload();
    await student.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 30_000 });
    await waitFor('the reloaded page shows it', async () => (await pixelsOf(student, MAGENTA)) > 2_000);
    expect(posts).toEqual([]);
    expect(imagesOf(await snapshot(l.lessonId))).toHaveLength(1);
    expect([...teacher.errors, ...student.errors]).toEqual([]);
    await Promise.all([teacher.context().close(), student.context().close()]);
  }, 180_000);

  it('an upload that fails for the network goes again: the image arrives once', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const teacher = await stack.open(await l.url('t1', 'Anna', 'teacher'));
    const student = await stack.open(await l.url('s1', 'Boris', 'student'));
    // the first two attempts are cut off (a phone between cells); the next ones go
    let cut = 0;
    await student.route(
      (url) => url.pathname === `/files/${l.lessonId}`,
      (route) => (cut++ < 2 ? route.abort('internetdisconnected') : route.continue()),
    );
    await paste(student, await magentaPng());
    await waitFor('the teacher sees the picture', async () => (await pixelsOf(teacher, MAGENTA)) > 2_000, 60_000);
    expect(cut).toBeGreaterThanOrEqual(3);
    const snap = await snapshot(l.lessonId);
    expect(imagesOf(snap)).toMatchObject([{ status: 'saved', file_id: snap.files[0].id }]);
    expect(snap.files).toHaveLength(1);
    await Promise.all([teacher.context().close(), student.context().close()]);
  }, 120_000);

  it('a PDF import cancelled half-way keeps the pages imported, each with its picture, and adds no other', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const teacher = await stack.open(await l.url('t1', 'Anna', 'teacher'), undefined, recordStatuses);
    // the third page's upload waits until Cancel is pressed
    const held: Route[] = [];
    let n = 0;
    await teacher.route(
      (url) => url.pathname === `/files/${l.lessonId}`,
      (route) => (++n === 3 ? void held.push(route) : route.continue()),
    );
    const pdf = await PDFDocument.create();
    for (let i = 0; i < 12; i++) pdf.addPage([72, 72]).drawRectangle({ x: 0, y: 0, width: 72, height: 72, color: rgb(0.2, i / 12, 0.6) });
    await teacher.locator('[data-testid=pdf-input]').setInputFiles({ name: 'Worksheet.pdf', mimeType: 'application/pdf', buffer: Buffer.from(await pdf.save()) });
    await waitFor('the third upload is on its way', async () => held.length === 1, 60_000);
    await teacher.locator('[data-testid=pdf-progress]').filter({ hasText: 'Importing page 3 of 12' }).waitFor();
    await teacher.locator('[data-testid=pdf-progress] button', { hasText: 'Cancel' }).click();
    await held[0].continue();
    await teacher.locator('[data-testid=pdf-progress]').waitFor({ state: 'detached', timeout: 30_000 });
    // the page whose upload was under way when Cancel was pressed is added whole; no other after it
    await waitFor('three pages with their saved pictures', async () => {
      const snap = await snapshot(l.lessonId);
      return snap.pages.length === 4 && imagesOf(snap).length === 3 && imagesOf(snap).every((e) => e.status === 'saved');
    });
    const snap = await snapshot(l.lessonId);
    expect(snap.pages.map((p: { name: string }) => p.name)).toEqual(['Page 1', 'Worksheet p. 1', 'Worksheet p. 2', 'Worksheet p. 3']);
    for (const page of snap.pages.slice(1)) expect(snap.elements.filter((e: { page_id: string }) => e.page_id === page.id)).toHaveLength(1);
    expect(n).toBe(3);
    expect(await statuses(teacher)).toEqual([]);
    await teacher.context().close();
  }, 120_000);

  it('a PDF of 51 pages: its first 50, in order, and a sentence saying so', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const teacher = await stack.open(await l.url('t1', 'Anna', 'teacher'), undefined, recordStatuses);
    // small pages of a shade each (cheap to make and render; each page a file of its own)
    const pdf = await PDFDocument.create();
    for (let i = 0; i < 51; i++) pdf.addPage([72, 72]).drawRectangle({ x: 0, y: 0, width: 72, height: 72, color: rgb(i / 60, 0.5, 1 - i / 60) });
    await teacher.locator('[data-testid=pdf-input]').setInputFiles({ name: 'Past exam.pdf', mimeType: 'application/pdf', buffer: Buffer.from(await pdf.save()) });
    // at most 50 pages an import: the first 50 are imported, and the teacher is told
    await teacher.getByRole('status').filter({ hasText: 'This PDF has 51 pages: the first 50 are imported (at most 50 at a time).' }).waitFor({ timeout: 30_000 });
    await teacher.locator('[data-testid=pdf-progress]').filter({ hasText: 'of 50' }).waitFor({ timeout: 30_000 });
    await teacher.locator('[data-testid=pdf-progress]').waitFor({ state: 'detached', timeout: 150_000 });
    expect(await statuses(teacher)).toEqual(['This PDF has 51 pages: the first 50 are imported (at most 50 at a time).']);
    await waitFor('every imported page has its saved image', async () => {
      const snap = await snapshot(l.lessonId);
      return snap.pages.length === 51 && imagesOf(snap).length === 50 && imagesOf(snap).every((e) => e.status === 'saved');
    });
    const snap = await snapshot(l.lessonId);
    expect(snap.pages.map((p: { name: string }) => p.name)).toEqual(['Page 1', ...Array.from({ length: 50 }, (_, i) => `Past exam p. ${i + 1}`)]);
    // one picture a page, each its own file; nothing of page 51
    for (const page of snap.pages.slice(1)) expect(snap.elements.filter((e: { page_id: string }) => e.page_id === page.id)).toHaveLength(1);
    expect(snap.files).toHaveLength(50);
    expect(teacher.errors).toEqual([]);
    await teacher.context().close();
  }, 240_000);
});
