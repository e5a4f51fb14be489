/**
 * A PDF read back with PDF.js (pdfjs-dist, the library the page imports worksheets with), for the
 * export tests: per page its size (points), its text as a reader would extract it, how many images
 * it paints and how many path operations it draws; the outline; and how many image objects the
 * file holds (an image embedded once is one object however often it is painted).
 */
export interface ParsedPdf {
  pages: { size: [number, number]; text: string; images: number; paths: number }[];
  outline: string[];
  imageObjects: number;
}

export async function parsePdf(bytes: Buffer): Promise<ParsedPdf> {
  const pdfjs = await import('pdfjs-dist/legacy/build/pdf.mjs');
  const doc = await pdfjs.getDocument({ data: new Uint8Array(bytes), isEvalSupported: false, useSystemFonts: false }).promise;
  const pages: ParsedPdf['pages'] = [];
  for (let i = 1; i <= doc.numPages; i++) {
    const page = await doc.getPage(i);
    const content = await page.getTextContent();
    const ops = await page.getOperatorList();
    const count = (op: number) => ops.fnArray.filter((f) => f === op).length;
    const text = content.items
      .map((it) => ('str' in it ? it.str : ''))
      .join(' ')
      .replace(/\s+/g, ' ')
      .trim();
    pages.push({ size: [Math.round(page.view[2]), Math.round(page.view[3])], text, images: count(pdfjs.OPS.paintImageXObject), paths: count(pdfjs.OPS.constructPath) });
  }
  const outline = ((await doc.getOutline()) ?? []).map((o) => o.title);
  await doc.destroy();
  const imageObjects = (bytes.toString('latin1').match(/\/Subtype \/Image/g) ?? []).length;
  return { pages, outline, imageObjects };
}

/** One page of a PDF rendered by PDF.js to a PNG (through @napi-rs/canvas, PDF.js's canvas in Node), to look at. */
export async function pdfPagePng(bytes: Buffer, pageNumber: number, scale = 1.5): Promise<Buffer> {
  const pdfjs = await import('pdfjs-dist/legacy/build/pdf.mjs');
  const doc = await pdfjs.getDocument({ data: new Uint8Array(bytes), isEvalSupported: false }).promise;
  const page = await doc.getPage(pageNumber);
  const viewport = page.getViewport({ scale });
  const factory = (doc as unknown as { canvasFactory: { create(w: number, h: number): { canvas: { toBuffer(t: string): Buffer }; context: unknown } } }).canvasFactory;
  const { canvas, context } = factory.create(Math.ceil(viewport.width), Math.ceil(viewport.height));
  await page.render({ canvasContext: context as CanvasRenderingContext2D, viewport } as Parameters<typeof page.render>[0]).promise;
  const png = canvas.toBuffer('image/png');
  await doc.destroy();
  return png;
}
