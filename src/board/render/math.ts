import { createRequire } from 'node:module';

/**
 * LaTeX typeset to SVG on the server (MathJax's TeX input and SVG output), for
 * the preview and the PDF export: the page shows formulas with KaTeX, which
 * only writes HTML; MathJax writes the same TeX as SVG paths, so resvg (PNG)
 * and svg-to-pdfkit (PDF) draw a fraction as a fraction. Glyphs are paths
 * (`fontCache: 'none'`): no font to load, and every formula stands alone in
 * the page's SVG. MathJax is loaded on the first formula a render child meets
 * (about 30 ms and 30 MB), so a child that draws none does not pay for it.
 */
export interface TypesetMath {
  /** the formula's own SVG body, colour `currentColor` */
  body: string;
  /** its viewBox, in thousandths of an em */
  viewBox: [number, number, number, number];
  /** size in em */
  widthEm: number;
  heightEm: number;
  /** characters of path data: what drawing it costs (render budget) */
  pathChars: number;
}

interface Converter {
  convert(latex: string): string;
}

let converter: Converter | null | undefined;

function load(): Converter | null {
  try {
    const require = createRequire(import.meta.url);
    const { mathjax } = require('mathjax-full/js/mathjax.js');
    const { TeX } = require('mathjax-full/js/input/tex.js');
    const { SVG } = require('mathjax-full/js/output/svg.js');
    const { liteAdaptor } = require('mathjax-full/js/adaptors/liteAdaptor.js');
    const { RegisterHTMLHandler } = require('mathjax-full/js/handlers/html.js');
    const { AllPackages } = require('mathjax-full/js/input/tex/AllPackages.js');
    const adaptor = liteAdaptor();
    RegisterHTMLHandler(adaptor);
    // the packages KaTeX knows of, near enough; bussproofs needs a second pass the SVG output lacks
    const doc = mathjax.document('', {
      InputJax: new TeX({ packages: (AllPackages as string[]).filter((p) => p !== 'bussproofs') }),
      OutputJax: new SVG({ fontCache: 'none' }),
    });
    return { convert: (latex) => adaptor.innerHTML(doc.convert(latex, { display: false, em: 16, ex: 8, containerWidth: 1000 })) };
  } catch {
    return null;
  }
}

/** Recently typeset formulas of this process (a board redraws the same ones render after render). */
const cache = new Map<string, TypesetMath | null>();
const CACHE_SIZE = 500;

/**
 * The formula typeset, or null when MathJax is not installed or cannot read
 * it at all (a TeX error is typeset as MathJax shows it: the source in red,
 * as KaTeX shows it with `throwOnError: false`).
 */
export function typesetMath(latex: string): TypesetMath | null {
  if (cache.has(latex)) return cache.get(latex)!;
  converter ??= load();
  let out: TypesetMath | null = null;
  if (converter) {
    try {
      const svg = converter.convert(latex);
      const vb = /viewBox="([-\d.]+) ([-\d.]+) ([-\d.]+) ([-\d.]+)"/.exec(svg);
      const open = svg.indexOf('>');
      if (vb && open > 0 && svg.endsWith('</svg>')) {
        const viewBox = vb.slice(1).map(Number) as TypesetMath['viewBox'];
        const body = svg.slice(open + 1, -'</svg>'.length);
        let pathChars = 0;
        for (const m of body.matchAll(/ d="([^"]*)"/g)) pathChars += m[1].length;
        out = { body, viewBox, widthEm: viewBox[2] / 1000, heightEm: viewBox[3] / 1000, pathChars };
      }
    } catch {
      out = null;
    }
  }
  if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
  cache.set(latex, out);
  return out;
}

/** The LaTeX the page typesets for a vector's label (web/src/board/Overlays.tsx, VectorLabel). */
export function vectorLabelLatex(label: string, magnitude: number | null, unit: string): string {
  return `\\vec{${label || 'v'}}${magnitude !== null ? ` = ${magnitude}\\,\\mathrm{${unit || ''}}` : ''}`;
}
