import { renderAsync } from '@resvg/resvg-js';
import type { BoardElement } from '../schema.js';
import { serverFonts } from './fonts.js';
import { renderPageSvg } from './svg.js';

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
  const fonts = serverFonts();
  const sans = fonts.sans?.family ?? fonts.serif?.family ?? 'sans-serif';
  const { svg, approximate } = renderPageSvg(elements, { outputWidth: width, images });
  const out = await renderAsync(svg, {
    fitTo: { mode: 'width', value: width },
    background: '#ffffff',
    font: {
      loadSystemFonts: fonts.files.length === 0,
      fontFiles: fonts.files,
      defaultFontFamily: sans,
      sansSerifFamily: sans,
      serifFamily: fonts.serif?.family ?? sans,
      monospaceFamily: fonts.mono?.family ?? sans,
    },
    logLevel: 'off',
  });
  return { png: out.asPng(), width: out.width, height: out.height, approximate };
}
