/**
 * What one preview render may draw, whatever the page holds (docs/board.md,
 * "Preview", "Bounded rendering"). resvg's time and memory grow with the
 * glyphs it shapes, the path points it flattens and the pixels it paints; each
 * is capped here, so the worst page the board limits allow costs about what a
 * busy real page costs. What does not fit is drawn more simply or not at all,
 * and the picture is then marked approximate:
 *
 * - text is clipped to what can lie inside the picture (a client declares an
 *   element's width, not its text's); text smaller than `minGlyphPx` output
 *   pixels, and all text once `glyphs` are used up, is drawn as one grey bar
 *   per line ("greeking"), as thumbnails of dense documents usually are;
 * - pen and line points are thinned evenly when the page has more than `points`;
 * - elements are admitted from the top of the stack down while their painted
 *   area (fill plus stroke, in output pixels; a stroke's length also costs
 *   `strokeEdgePx` a pixel) fits in `paintCanvases` pictures' worth of
 *   pixels; the ones below are left out;
 * - dashes shorter than `minDashPx`, or more than `dashesPerElement` of them,
 *   are drawn as a solid stroke.
 */
export const RENDER_BUDGET = {
  /** characters drawn as glyphs in one render */
  glyphs: 10_000,
  /** what each text element drawn as glyphs costs besides its characters (resvg prepares its font per element) */
  glyphsPerTextElement: 16,
  /** text smaller than this (output pixels) is greeked */
  minGlyphPx: 3,
  /** elements drawn in one render (each is parsed and painted on its own) */
  elements: 8_000,
  /** path points in one render (pen strokes, lines, greeked lines) */
  points: 150_000,
  /** pixels painted in one render, in multiples of the picture's own area */
  paintCanvases: 40,
  /** what a pixel of stroke length costs besides the stroke's area, in fill pixels (anti-aliased edges, joins) */
  strokeEdgePx: 15,
  minDashPx: 3,
  dashesPerElement: 2_000,
} as const;

/** The figures of a budget: RENDER_BUDGET, or another caller's (the PDF export draws everything: render/pdf.ts). */
export type RenderBudgetLimits = { readonly [K in keyof typeof RENDER_BUDGET]: number };

type Spendable = 'glyphs' | 'points' | 'paint';

/** A render's remaining budget, spent as elements are admitted. */
export class RenderBudget {
  glyphs: number;
  points: number;
  /** pixels */
  paint: number;
  /** something was simplified or left out */
  approximate = false;

  constructor(canvasPixels: number, b: RenderBudgetLimits = RENDER_BUDGET) {
    this.glyphs = b.glyphs;
    this.points = b.points;
    this.paint = canvasPixels * b.paintCanvases;
  }

  /** Spends `n` of a budget; false (and nothing spent, the picture approximate) when it does not fit. */
  private spend(what: Spendable, n: number): boolean {
    if (n > this[what]) {
      this.approximate = true;
      return false;
    }
    this[what] -= n;
    return true;
  }

  takePaint = (px: number): boolean => this.spend('paint', px);
  takeGlyphs = (n: number): boolean => this.spend('glyphs', n);
  takePoints = (n: number): boolean => this.spend('points', n);
}
