import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { renderAsync } from '@resvg/resvg-js';
import type { BoardElement } from '../schema.js';
import { renderPageSvg } from './svg.js';

/**
 * Fonts for the preview. resvg does not read woff2, so the page's own
 * (Excalidraw) fonts cannot be used. resvg parses the font for every text
 * element, so a small font matters: Liberation Sans (140 KB, Latin, Cyrillic,
 * Greek) renders a text-heavy page ~3x faster than DejaVu Sans (750 KB), which
 * is only the fallback. Formulas use KaTeX's TrueType fonts. An explicit list
 * instead of every system font keeps each render fast.
 */
interface FontSet {
  files: string[];
  sans: string;
  mono: string;
  serif: string;
}

function pick(candidates: [string, string][]): [string, string] | undefined {
  return candidates.find(([f]) => existsSync(f));
}

function fontSet(): FontSet {
  const files: string[] = [];
  const sans = pick([
    ['/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf', 'Liberation Sans'],
    ['/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf', 'DejaVu Sans'],
  ]);
  const mono = pick([
    ['/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf', 'Liberation Mono'],
    ['/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf', 'DejaVu Sans Mono'],
  ]);
  for (const f of [sans, mono]) if (f) files.push(f[0]);
  // wide coverage (sub/superscripts, symbols) for glyphs the small font lacks; resvg only reads it for those
  const wide = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf';
  if (existsSync(wide) && !files.includes(wide)) files.push(wide);
  let katex = false;
  try {
    const require = createRequire(import.meta.url);
    const dir = path.join(path.dirname(require.resolve('katex/package.json')), 'dist', 'fonts');
    for (const f of ['KaTeX_Main-Regular.ttf', 'KaTeX_Main-Italic.ttf']) {
      const p = path.join(dir, f);
      if (existsSync(p)) {
        files.push(p);
        katex = true;
      }
    }
  } catch {
    // katex is not installed (production without dev dependencies): no serif font
  }
  const fallback = sans?.[1] ?? (katex ? 'KaTeX_Main' : 'sans-serif');
  return { files, sans: fallback, mono: mono?.[1] ?? fallback, serif: katex ? 'KaTeX_Main' : fallback };
}

let fonts: FontSet | undefined;

export interface RenderedPng {
  png: Buffer;
  width: number;
  height: number;
  /** RENDER_BUDGET simplified or left something out */
  approximate: boolean;
}

/**
 * Renders one page's elements to a PNG `width` pixels wide, within
 * RENDER_BUDGET (budget.ts). The service calls it only in a render child
 * process (RenderPool): a render's time and memory are then limited and
 * cannot touch the process serving lessons.
 */
export async function renderPagePng(elements: BoardElement[], width: number, images?: Map<string, string>): Promise<RenderedPng> {
  fonts ??= fontSet();
  const { svg, approximate } = renderPageSvg(elements, { outputWidth: width, images });
  const out = await renderAsync(svg, {
    fitTo: { mode: 'width', value: width },
    background: '#ffffff',
    font: {
      loadSystemFonts: fonts.files.length === 0,
      fontFiles: fonts.files,
      defaultFontFamily: fonts.sans,
      sansSerifFamily: fonts.sans,
      serifFamily: fonts.serif,
      monospaceFamily: fonts.mono,
    },
    logLevel: 'off',
  });
  return { png: out.asPng(), width: out.width, height: out.height, approximate };
}
