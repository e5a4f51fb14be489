import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * The server's fonts, for the preview (resvg, png.ts) and the PDF export
 * (pdfkit, pdf.ts). Neither reads woff2, so the page's own (Excalidraw) fonts
 * cannot be used. resvg parses the font for every text element, so a small
 * font matters: Liberation Sans (140 KB, Latin, Cyrillic, Greek) renders a
 * text-heavy page ~3x faster than DejaVu Sans (750 KB), which is only the
 * fallback. Formulas typeset by MathJax are paths and need none; their
 * plain-text fallback uses KaTeX's TrueType font. An explicit list instead of
 * every system font keeps each render fast.
 */
export interface ServerFont {
  file: string;
  family: string;
}

export interface FontSet {
  /** every file, for resvg */
  files: string[];
  sans?: ServerFont;
  mono?: ServerFont;
  serif?: ServerFont;
  serifItalic?: ServerFont;
}

function pick(candidates: [string, string][]): ServerFont | undefined {
  const hit = candidates.find(([f]) => existsSync(f));
  return hit && { file: hit[0], family: hit[1] };
}

function katexFont(name: string): ServerFont | undefined {
  try {
    const require = createRequire(import.meta.url);
    const file = path.join(path.dirname(require.resolve('katex/package.json')), 'dist', 'fonts', `${name}.ttf`);
    return existsSync(file) ? { file, family: 'KaTeX_Main' } : undefined;
  } catch {
    // katex is not installed (production without dev dependencies): no serif font
    return undefined;
  }
}

let fonts: FontSet | undefined;

export function serverFonts(): FontSet {
  if (fonts) return fonts;
  const sans = pick([
    ['/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf', 'Liberation Sans'],
    ['/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf', 'DejaVu Sans'],
  ]);
  const mono = pick([
    ['/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf', 'Liberation Mono'],
    ['/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf', 'DejaVu Sans Mono'],
  ]);
  const files: string[] = [];
  for (const f of [sans, mono]) if (f) files.push(f.file);
  // wide coverage (sub/superscripts, symbols) for glyphs the small font lacks; resvg only reads it for those
  const wide = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf';
  if (existsSync(wide) && !files.includes(wide)) files.push(wide);
  const serif = katexFont('KaTeX_Main-Regular');
  const serifItalic = katexFont('KaTeX_Main-Italic');
  for (const f of [serif, serifItalic]) if (f) files.push(f.file);
  fonts = { files, sans, mono, serif, serifItalic };
  return fonts;
}
