import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { renderAsync } from '@resvg/resvg-js';
import type { BoardElement } from '../schema.js';
import { renderPageSvg } from './svg.js';

/**
 * Fonts for the preview. resvg does not read woff2, so the page's own
 * (Excalidraw) fonts cannot be used; the thumbnail uses DejaVu/Liberation when
 * the system has them (Debian's fonts-dejavu-core comes with chromium) and
 * KaTeX's TrueType files for formulas. Loading an explicit list instead of
 * scanning every system font keeps each render fast.
 */
function fontFiles(): string[] {
  const files: string[] = [];
  for (const f of [
    '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf',
    '/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf',
    '/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf',
    '/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf',
  ]) {
    if (existsSync(f)) files.push(f);
  }
  try {
    const require = createRequire(import.meta.url);
    const katexDir = path.join(path.dirname(require.resolve('katex/package.json')), 'dist', 'fonts');
    for (const f of ['KaTeX_Main-Regular.ttf', 'KaTeX_Main-Italic.ttf', 'KaTeX_Math-Italic.ttf', 'KaTeX_Typewriter-Regular.ttf', 'KaTeX_AMS-Regular.ttf']) {
      const p = path.join(katexDir, f);
      if (existsSync(p)) files.push(p);
    }
  } catch {
    // katex is not installed (production without dev dependencies): system fonts only
  }
  return files;
}

let fonts: string[] | undefined;

export interface RenderedPng {
  png: Buffer;
  width: number;
  height: number;
}

/**
 * Renders one page's elements to a PNG `width` pixels wide. resvg runs on the
 * libuv thread pool (renderAsync), so a large page does not stall the process.
 */
export async function renderPagePng(elements: BoardElement[], width: number): Promise<RenderedPng> {
  fonts ??= fontFiles();
  const { svg } = renderPageSvg(elements);
  const out = await renderAsync(svg, {
    fitTo: { mode: 'width', value: width },
    background: '#ffffff',
    font: {
      loadSystemFonts: fonts.length === 0,
      fontFiles: fonts,
      defaultFontFamily: 'DejaVu Sans',
      sansSerifFamily: 'DejaVu Sans',
      serifFamily: 'DejaVu Serif',
      monospaceFamily: 'DejaVu Sans Mono',
    },
    logLevel: 'off',
  });
  return { png: out.asPng(), width: out.width, height: out.height };
}
