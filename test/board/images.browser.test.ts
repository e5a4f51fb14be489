import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PDFDocument, rgb, StandardFonts } from 'pdf-lib';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { readPreview, startTestApi } from '../helpers/api.js';
import { suiteOrFull } from '../helpers/length.js';
import { goToPage, showsExactly } from './actions.js';
import { PHONE, startPageStack } from './browser.js';
import { colourful, MAGENTA, magentaPng, paste, pixelsOf, waiter } from './imagesPage.js';
import { phonePhoto } from './photo.js';
import { builtWeb } from './web.js';

/**
 * Images and PDFs on the board, two people in Chromium against the real
 * gateway and API: a student's phone photo and a pasted picture, a teacher's
 * PDF of three pages; what the others, a reload and a late joiner see, and what
 * the partner's snapshot lists. At most 4 files a lesson, so a refusal is reached.
 */
const stack = await startPageStack({ FILE_LESSON_MAX_FILES: '4' });
const api = await startTestApi({ env: stack.gw.env });

const waitFor = waiter(stack, 'images');
const snapshot = async (lessonId: string) => (await api.request('GET', `/lessons/${lessonId}/snapshot`, { key: stack.partner().apiKey })).body;

describe('images on the board', () => {
  it('a student on a phone adds a photo and a pasted picture; the teacher, a reload and a late joiner see them; the snapshot lists them', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const teacher = await stack.open(await l.url('t1', 'Anna', 'teacher'));
    const student = await stack.open(await l.url('s1', 'Boris', 'student'), PHONE);
    const uploads: number[] = [];
    student.on('request', (r) => {
      if (r.method() === 'POST' && r.url().includes('/files/')) uploads.push(r.postDataBuffer()?.length ?? 0);
    });

    // the phone's picker: image/* (the phone offers its camera beside the gallery)
    expect(await student.locator('[data-testid=image-input]').getAttribute('accept')).toBe('image/*');
    // a phone's 12 megapixels (about 11 MB) in the full run; 6.75 (about 6 MB) in the suite, still scaled down
    const photo = await suiteOrFull(() => phonePhoto(3000, 2250), () => phonePhoto())();
    expect(photo.length).toBeGreaterThan(suiteOrFull(5_000_000, 10_000_000));
    await student.locator('[data-testid=image-input]').setInputFiles({ name: 'homework.jpg', mimeType: 'image/jpeg', buffer: photo });
    await showsExactly(teacher, 1);
    await waitFor('the teacher sees the photo', async () => (await colourful(teacher)) > 5_000);
    // scaled to 2,560 px and re-encoded on the phone: well under 1 MB on the wire
    expect(uploads).toHaveLength(1);
    expect(uploads[0]).toBeLessThan(1_000_000);

    await paste(student, await magentaPng());
    await showsExactly(teacher, 2);
    await waitFor('the teacher sees the pasted picture', async () => (await pixelsOf(teacher, MAGENTA)) > 2_000);
    await waitFor('the student sees it too', async () => (await pixelsOf(student, MAGENTA)) > 2_000);
    await stack.shot(student, 'images-phone');

    // a reload shows both, from the browser's cache (fetched once per file)
    await teacher.reload();
    await teacher.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 30_000 });
    await waitFor('the reloaded page shows both', async () => (await pixelsOf(teacher, MAGENTA)) > 2_000 && (await colourful(teacher)) > 5_000);
    const fetched = await teacher.evaluate(() =>
      performance.getEntriesByType('resource').filter((e) => e.name.includes('/files/')).map((e) => (e as PerformanceResourceTiming).transferSize),
    );
    expect(fetched).toHaveLength(2);
    expect(fetched.every((bytes) => bytes === 0)).toBe(true);
    await stack.shot(teacher, 'images-teacher-reloaded');

    const late = await stack.open(await l.url('s2', 'Vera', 'student'));
    await waitFor('a late joiner sees both', async () => (await pixelsOf(late, MAGENTA)) > 2_000 && (await colourful(late)) > 5_000);

    const snap = await snapshot(l.lessonId);
    expect(snap.files).toHaveLength(2);
    const images = snap.elements.filter((e: { type: string }) => e.type === 'image');
    expect(images).toHaveLength(2);
    for (const img of images) {
      expect(img.status).toBe('saved');
      expect(snap.files.map((f: { id: string }) => f.id)).toContain(img.file_id);
    }
    // the partner's preview draws them (its first page)
    const preview = await readPreview(api.base, l.lessonId, stack.partner().apiKey);
    expect(preview.status).toBe(200);
    const { data, info } = await sharp(Buffer.from(await preview.arrayBuffer())).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    let magenta = 0;
    for (let i = 0; i < data.length; i += info.channels) if (data[i] > 215 && data[i + 1] < 40 && data[i + 2] > 215) magenta++;
    expect(magenta).toBeGreaterThan(1_000);
    const photoFile = snap.files.find((f: { type: string }) => f.type === 'image/jpeg');
    expect(Math.max(photoFile.width, photoFile.height)).toBe(2560);
    expect([...teacher.errors, ...student.errors, ...late.errors]).toEqual([]);
    await Promise.all([teacher.context().close(), student.context().close(), late.context().close()]);
  }, 300_000);

  it('a teacher imports a 3-page PDF: three new pages, in order, the page at the back and locked; the student sees each; refusals say why', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const teacher = await stack.open(await l.url('t1', 'Anna', 'teacher'));
    const student = await stack.open(await l.url('s1', 'Boris', 'student'));
    // PDF.js is not part of the board's first load: the teacher's page fetches it when importing
    const scripts = () => teacher.evaluate(() => performance.getEntriesByType('resource').map((e) => e.name).filter((n) => n.endsWith('.js')));
    const withPdfJs = (urls: string[]) => urls.filter((u) => readFileSync(path.join(builtWeb(), 'assets', path.basename(u)), 'utf8').includes('GlobalWorkerOptions'));
    expect(withPdfJs(await scripts())).toEqual([]);
    const colours: [number, number, number][] = [
      [230, 20, 20],
      [20, 160, 40],
      [20, 60, 230],
    ];
    const pdf = await PDFDocument.create();
    const font = await pdf.embedFont(StandardFonts.Helvetica);
    for (const [i, [r, g, b]] of colours.entries()) {
      const page = pdf.addPage([595, 842]);
      page.drawRectangle({ x: 60, y: 300, width: 475, height: 480, color: rgb(r / 255, g / 255, b / 255) });
      page.drawText(`Task ${i + 1}`, { x: 60, y: 200, size: 48, font });
    }
    await teacher.locator('[data-testid=pdf-input]').setInputFiles({ name: 'Worksheet 7.pdf', mimeType: 'application/pdf', buffer: Buffer.from(await pdf.save()) });
    await student.locator('[data-testid=page-tab-3]').waitFor({ timeout: 60_000 });
    await teacher.locator('[data-testid=pdf-progress]').waitFor({ state: 'detached', timeout: 60_000 });

    expect(withPdfJs(await scripts())).toHaveLength(1);
    const snap = await snapshot(l.lessonId);
    expect(snap.pages.map((p: { name: string }) => p.name)).toEqual(['Page 1', 'Worksheet 7 p. 1', 'Worksheet 7 p. 2', 'Worksheet 7 p. 3']);
    expect(snap.files).toHaveLength(3);
    for (const [i, page] of snap.pages.slice(1).entries()) {
      const [img] = snap.elements.filter((e: { page_id: string }) => e.page_id === page.id);
      expect(img).toMatchObject({ type: 'image', locked: true, x: 0, y: 0, width: 793, height: 1123, status: 'saved' });
      expect(snap.files.find((f: { id: string }) => f.id === img.file_id)).toMatchObject({ width: 1587, height: 2246 });
      // the student sees that page's own picture: its colour, and none of the others'
      await goToPage(student, i + 1);
      await waitFor(`page ${i + 1} shows its picture`, async () => (await pixelsOf(student, colours[i])) > 5_000);
      for (const [j, other] of colours.entries()) if (j !== i) expect(await pixelsOf(student, other)).toBeLessThan(50);
    }
    await stack.shot(student, 'images-pdf-page-3');

    // a file that is neither an image nor a PDF, dropped: a sentence, not the editor's "Couldn't load invalid file"
    await student.evaluate(() => {
      const dt = new DataTransfer();
      dt.items.add(new File(['hello'], 'notes.txt', { type: 'text/plain' }));
      document.querySelector('[data-testid=board] canvas.interactive')!.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true, clientX: 400, clientY: 400 }));
    });
    await student.getByRole('status').filter({ hasText: 'Only PNG, JPEG, WebP and GIF images and PDF files can be added to the board.' }).waitFor();
    expect(await student.locator('.excalidraw .ErrorDialog').count()).toBe(0);

    // the lesson's fourth file is kept, the fifth refused: the server's sentence, and the image goes
    await paste(student, await magentaPng());
    await waitFor('the fourth file is kept', async () => (await snapshot(l.lessonId)).files.length === 4);
    await paste(student, await sharp({ create: { width: 50, height: 50, channels: 3, background: '#0ff' } }).png().toBuffer());
    await student.getByRole('status').filter({ hasText: 'This lesson already holds 4 files' }).waitFor();
    const CYAN: [number, number, number] = [0, 255, 255];
    await waitFor('the refused image is gone', async () => (await pixelsOf(student, CYAN)) === 0 && !(await snapshot(l.lessonId)).elements.some((e: { status?: string }) => e.status === 'pending'));
    expect((await snapshot(l.lessonId)).files).toHaveLength(4);
    await Promise.all([teacher.context().close(), student.context().close()]);
  }, 300_000);
});
