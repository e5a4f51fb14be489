import PDFDocument from 'pdfkit';
import SVGtoPDF from 'svg-to-pdfkit';
import type { BoardElement } from '../schema.js';
import { RENDER_BUDGET, type RenderBudgetLimits } from './budget.js';
import { serverFonts } from './fonts.js';
import { renderPageSvg } from './svg.js';

/**
 * The board as a PDF (docs/board.md, "Notes as a PDF"): one PDF page per board
 * page in the board's order, each drawn from the same SVG as the preview
 * (svg.ts: framed the same way, formulas typeset by MathJax) by svg-to-pdfkit
 * into a pdfkit document. Text elements become real text in an embedded
 * subset of the server's fonts (selectable, searchable); shapes, strokes and
 * formulas stay vectors; an image file is embedded once however often the
 * board shows it (pdfkit keeps one XObject per picture, keyed by the string
 * svg-to-pdfkit hands it). Runs only in a render child (worker.ts).
 */
export interface PdfPage {
  name: string;
  /** stacking order */
  elements: BoardElement[];
}

/** Everything is drawn: a PDF has no pixels to save, and its limits are the export's own (EXPORT_LIMITS, export.ts). */
const UNBOUNDED: RenderBudgetLimits = {
  ...RENDER_BUDGET,
  glyphs: Infinity,
  elements: Infinity,
  points: Infinity,
  paintCanvases: Infinity,
  minGlyphPx: 0,
  minDashPx: 0,
  dashesPerElement: Infinity,
};

/**
 * Pen points closer than this (scene units, 0.375 pt) to the last one kept are dropped and the rest
 * joined by straight segments, coordinates in whole units: what a print or a zoomed-in viewer shows
 * is the same, and curves through every point made a handwritten page's export several times slower
 * (svg-to-pdfkit builds objects for every curve segment; the garbage collector took most of the time).
 */
const PEN_TOLERANCE = 0.5;

/** PDF points per scene unit for a page of normal size (a screen pixel is 0.75 pt)... */
const PT_PER_UNIT = 0.75;
/** ...and the longest side a page gets (A2's long side), larger boards drawn smaller: viewers zoom vectors freely */
const MAX_SIDE_PT = 1684;

/** Generic families of svg.ts (FONTS) to the names fonts are registered under. */
const FAMILY: Record<string, string> = { 'sans-serif': 'sans', monospace: 'mono', serif: 'serif' };

export async function renderBoardPdf(pages: PdfPage[], images: Map<string, string>, title: string): Promise<Buffer> {
  const doc = new PDFDocument({ autoFirstPage: false, compress: true, info: { Title: title, Creator: 'lesson-service' }, pdfVersion: '1.7', displayTitle: true });
  const chunks: Buffer[] = [];
  doc.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise<void>((resolve, reject) => {
    doc.on('end', resolve);
    doc.on('error', reject);
  });
  const fonts = serverFonts();
  const registered = new Set<string>();
  for (const [name, f] of [['sans', fonts.sans], ['mono', fonts.mono], ['serif', fonts.serif], ['serif-italic', fonts.serifItalic]] as const) {
    if (f) {
      doc.registerFont(name, f.file);
      registered.add(name);
    }
  }
  const font = (family: string, _bold: boolean, italic: boolean): string => {
    const base = FAMILY[family] ?? 'sans';
    if (base === 'serif' && italic && registered.has('serif-italic')) return 'serif-italic';
    if (registered.has(base)) return base;
    return registered.has('sans') ? 'sans' : 'Helvetica';
  };
  // svg.ts names an image by the file's reference; the same string for every use of a file makes pdfkit embed it once
  const ref = new Map<string, string>();
  for (const id of images.keys()) ref.set(id, `lesson-file:${id}`);
  const dataOf = new Map<string, string>();
  for (const [id, url] of images) dataOf.set(`lesson-file:${id}`, url);
  for (const page of pages) {
    const { svg, width, height } = renderPageSvg(page.elements, { images: ref, budget: UNBOUNDED, tolerance: PEN_TOLERANCE });
    const k = Math.min(PT_PER_UNIT, MAX_SIDE_PT / Math.max(width, height));
    const [w, h] = [width * k, height * k];
    doc.addPage({ size: [w, h], margin: 0 });
    doc.outline.addItem(page.name);
    SVGtoPDF(doc as unknown as Parameters<typeof SVGtoPDF>[0], svg, 0, 0, {
      width: w,
      height: h,
      preserveAspectRatio: 'xMidYMid meet',
      fontCallback: font,
      imageCallback: (link: string) => dataOf.get(link) ?? '',
      warningCallback: () => undefined,
    });
  }
  doc.end();
  await done;
  return Buffer.concat(chunks);
}
