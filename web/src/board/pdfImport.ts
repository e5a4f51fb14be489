import { BOARD_LIMITS } from '../../../src/board/limits.js';
import type { BoardElement, BoardOp, BoardPage } from '../../../src/board/schema.js';
import type { Role } from '../../../src/domain/enums.js';
import { canvasBlob, dataURL, Refused, type FileTransfer, type LoadedFile } from './images.js';

/** Pages of one import; a longer PDF has its first MAX_PDF_PAGES imported, and the person is told. */
export const MAX_PDF_PAGES = 50;
/** the board's own limit of pages */
const BOARD_PAGES = BOARD_LIMITS.pages;
/** a PDF point is 1/72 inch, a scene unit a CSS pixel (1/96 inch): a page is shown at its printed size */
const CSS_PER_POINT = 96 / 72;
/** rendered at twice the scene size: sharp at 2x zoom on a laptop (1x pixel ratio), or 1x on a 2x screen */
const RENDER_SCALE = 2;
const MAX_SIDE = 2560;
/**
 * A page at most this often: its two operations then take at most half of the gateway's budget of
 * board operations (20 a second per person, realtime/admission/PersonRates.ts), leaving the rest to
 * the person's drawing. Small pages render and upload faster than that: without the pause a long
 * PDF's operations were refused past the budget, and pages went missing.
 */
const PAGE_INTERVAL_MS = 200;

export interface PdfImportHost {
  transfer: FileTransfer;
  role: Role;
  pages(): readonly BoardPage[];
  /** the page shown: the imported pages go after it */
  currentPage(): string;
  submit(op: BoardOp): void;
  addFiles(files: LoadedFile[]): void;
  notify(text: string): void;
  progress(text: string | null): void;
  /** whether the node the page is on keeps images (not during a rolling deploy from a release without them) */
  takesImages(): boolean;
}

/** a node that keeps no images: an import would add pages without their pictures */
export const NO_IMPORT_NOW = 'PDFs cannot be imported at the moment (the board is being updated): try again in a few minutes.';

const randomId = (prefix: string) => prefix + Array.from(crypto.getRandomValues(new Uint8Array(10)), (b) => 'abcdefghijklmnopqrstuvwxyz0123456789'[b % 36]).join('');

/** "Worksheet 3 p. 2", within the board's 60 characters for a page name. */
export function pageName(fileName: string, n: number): string {
  const suffix = ` p. ${n}`;
  const base = fileName.replace(/\.pdf$/i, '').replace(/\s+/g, ' ').trim() || 'PDF';
  return base.slice(0, 60 - suffix.length).trim() + suffix;
}

/**
 * A PDF becomes board pages, one per PDF page, in order, after the page shown
 * (docs/board.md, "Images and PDFs"). PDF.js (pdfjs-dist) is loaded only here,
 * by a dynamic import: the board's first load does not carry it. Each page is
 * rendered on a canvas at RENDER_SCALE, uploaded as an image, and placed at the
 * back of its new page, at the page's printed size, locked when a teacher
 * imports (a student cannot lock: theirs is at the back, unlocked). Returns
 * when done or cancelled; the pages imported so far stay.
 */
export async function importPdf(file: File, host: PdfImportHost, cancelled: () => boolean): Promise<void> {
  if (!host.takesImages()) return host.notify(NO_IMPORT_NOW);
  host.progress('Opening the PDF…');
  try {
    const pdfjs = await import('pdfjs-dist');
    // PDF.js's parser on the page's own thread, loaded with it (a worker would need a script URL of its own)
    // @ts-expect-error the worker module ships without types; only its WorkerMessageHandler is read
    const worker = await import('pdfjs-dist/build/pdf.worker.mjs');
    (globalThis as { pdfjsWorker?: unknown }).pdfjsWorker = worker;
    const doc = await pdfjs.getDocument({ data: new Uint8Array(await file.arrayBuffer()), isEvalSupported: false }).promise;
    try {
      const room = BOARD_PAGES - host.pages().length;
      const total = Math.min(doc.numPages, MAX_PDF_PAGES, room);
      if (total <= 0) {
        host.notify(`The board has ${BOARD_PAGES} pages already: delete one to import a PDF.`);
        return;
      }
      if (doc.numPages > total) {
        host.notify(
          doc.numPages > MAX_PDF_PAGES && total === MAX_PDF_PAGES
            ? `This PDF has ${doc.numPages} pages: the first ${MAX_PDF_PAGES} are imported (at most ${MAX_PDF_PAGES} at a time).`
            : `This PDF has ${doc.numPages} pages: the first ${total} are imported (a board has at most ${BOARD_PAGES} pages).`,
        );
      }
      let after = host.currentPage();
      let lastPageAt = -Infinity;
      for (let i = 1; i <= total; i++) {
        if (cancelled()) return;
        host.progress(`Importing page ${i} of ${total}`);
        const page = await doc.getPage(i);
        const size = page.getViewport({ scale: CSS_PER_POINT });
        const k = Math.min(RENDER_SCALE, MAX_SIDE / Math.max(size.width, size.height));
        const viewport = page.getViewport({ scale: CSS_PER_POINT * k });
        const canvas = document.createElement('canvas');
        canvas.width = Math.ceil(viewport.width);
        canvas.height = Math.ceil(viewport.height);
        const ctx = canvas.getContext('2d')!;
        ctx.fillStyle = '#ffffff';
        ctx.fillRect(0, 0, canvas.width, canvas.height);
        await page.render({ canvas, canvasContext: ctx, viewport }).promise;
        page.cleanup();
        const blob = await canvasBlob(canvas, 'image/png');
        canvas.width = canvas.height = 0;
        if (cancelled()) return;
        const info = await host.transfer.upload(blob, cancelled);
        if (!host.takesImages()) {
          // the page moved to a node without images meanwhile: no page is added without its picture
          host.notify(`${NO_IMPORT_NOW} ${i > 1 ? `Pages 1-${i - 1} were imported.` : ''}`.trim());
          return;
        }
        host.addFiles([{ id: info.id, dataURL: await dataURL(blob), mimeType: info.type }]);
        host.transfer.have(info.id);
        const wait = lastPageAt + PAGE_INTERVAL_MS - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        lastPageAt = performance.now();
        const pageId = randomId('pg-');
        host.submit({ type: 'page.add', page: { id: pageId, name: pageName(file.name, i) }, after_page_id: after });
        const image: BoardElement = {
          id: randomId('pdf-'),
          page_id: pageId,
          // the back of the page: whatever is drawn later goes over it
          z: 'a0',
          x: 0,
          y: 0,
          angle: 0,
          style: { stroke: 'transparent', fill: 'transparent', stroke_width: 1, stroke_style: 'solid', fill_style: 'solid', opacity: 100 },
          locked: host.role === 'teacher',
          version: 1,
          version_nonce: crypto.getRandomValues(new Int32Array(1))[0],
          type: 'image',
          width: Math.round(size.width),
          height: Math.round(size.height),
          file_id: info.id,
          status: 'saved',
          scale: [1, 1],
          crop: null,
        };
        host.submit({ type: 'element.add', elements: [image] });
        after = pageId;
      }
    } finally {
      void doc.destroy();
    }
  } catch (err) {
    if (err instanceof Refused) {
      if (err.code !== 'cancelled') host.notify(err.message);
    } else host.notify(`"${file.name}" could not be read as a PDF.`);
  } finally {
    host.progress(null);
  }
}
