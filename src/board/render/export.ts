import type { Sql } from '../../db/index.js';
import type { BoardElement } from '../schema.js';
import { previewImages } from './images.js';
import { renderBoardPdf, type PdfPage } from './pdf.js';

/**
 * What one PDF export may cost (settings BOARD_EXPORT_*, docs/board.md "Notes
 * as a PDF"). The board's own limits already bound a board; these keep one
 * export within the render child's time and memory limits, and a board past
 * them gets `export_too_large` rather than a render that is killed half-way.
 */
export interface ExportLimits {
  /** the export is killed after this long */
  timeoutMs: number;
  /** live elements on the whole board */
  elements: number;
  /** bytes of the image files the board shows (each embedded once) */
  imageBytes: number;
  /** bytes of the finished PDF */
  pdfBytes: number;
}

/** The longest side of an embedded picture, in pixels: sharp enough to print a full-page photo at 170 dpi. */
export const EXPORT_IMAGE_SIDE = 2048;

export type ExportOutcome =
  | { kind: 'pdf'; seq: number; pdf: Uint8Array; pages: number }
  | { kind: 'empty'; seq: number }
  | { kind: 'too_large'; seq: number; reason: string };

/**
 * Reads the whole board in one snapshot (every page, in the board's order)
 * and renders it as a PDF (pdf.ts); null when the lesson has no board. Runs in
 * a render child (worker.ts), so a board of many megabytes never reaches the
 * serving process.
 */
export async function exportBoard(sql: Sql, lessonId: string, limits: ExportLimits): Promise<ExportOutcome | null> {
  type Head = { seq: number; pages: { id: string; name: string }[]; live_elements: number; title: string };
  type Read = null | { outcome: ExportOutcome } | { head: Head; elements: BoardElement[] };
  const read = await sql.begin('isolation level repeatable read read only', async (tx): Promise<Read> => {
    const [head] = await tx<Head[]>`
      SELECT b.seq, b.pages, b.live_elements, l.title FROM boards b JOIN lessons l ON l.id = b.lesson_id WHERE b.lesson_id = ${lessonId}`;
    if (!head) return null;
    if (head.live_elements === 0) return { outcome: { kind: 'empty', seq: head.seq } };
    if (head.live_elements > limits.elements) {
      return { outcome: { kind: 'too_large', seq: head.seq, reason: `the board has ${head.live_elements} elements; an export takes at most ${limits.elements}` } };
    }
    const els = await tx<{ data: BoardElement }[]>`
      SELECT data FROM board_elements WHERE lesson_id = ${lessonId} AND NOT deleted ORDER BY z, element_id`;
    const ids = [...new Set(els.flatMap(({ data: e }) => (e.type === 'image' && e.status === 'saved' ? [e.file_id] : [])))];
    const [{ bytes }] = ids.length
      ? await tx<{ bytes: number }[]>`SELECT coalesce(sum(bytes), 0)::bigint AS bytes FROM lesson_files WHERE lesson_id = ${lessonId} AND file_id = ANY(${ids}::text[])`
      : [{ bytes: 0 }];
    if (bytes > limits.imageBytes) {
      return { outcome: { kind: 'too_large', seq: head.seq, reason: `the board's images are ${bytes} bytes; an export takes at most ${limits.imageBytes}` } };
    }
    return { head, elements: els.map((e) => e.data) };
  });
  if (!read) return null;
  if ('outcome' in read) return read.outcome;
  const { head, elements } = read;
  const byPage = new Map<string, BoardElement[]>(head.pages.map((p) => [p.id, []]));
  for (const el of elements) byPage.get(el.page_id)?.push(el);
  const pages: PdfPage[] = head.pages.map((p) => ({ name: p.name, elements: byPage.get(p.id)! }));
  const pictures = await previewImages(sql, lessonId, elements, EXPORT_IMAGE_SIDE, { files: Infinity, bytes: Infinity });
  const pdf = await renderBoardPdf(pages, pictures.images, head.title);
  if (pdf.length > limits.pdfBytes) {
    return { kind: 'too_large', seq: head.seq, reason: `the PDF would be ${pdf.length} bytes; an export is at most ${limits.pdfBytes}` };
  }
  return { kind: 'pdf', seq: head.seq, pdf, pages: pages.length };
}
