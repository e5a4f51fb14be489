import type { BoardElement } from './schema.js';

/**
 * Size limits of the board (docs/board.md, "Limits"). They keep one lesson from
 * exhausting a gateway's memory, Postgres or the preview renderer, while being
 * far above what a real lesson draws (a busy 90-minute lesson has a few
 * thousand elements).
 */
export const BOARD_LIMITS = {
  /** elements named by one operation (add/update/delete) */
  elementsPerOp: 100,
  /** live elements on one board */
  elementsPerBoard: 20_000,
  /** bytes of element JSON on one board (live elements), text weighted (textWeight) */
  bytesPerBoard: 16 * 1024 * 1024,
  /**
   * A character of text (a text element's text, a formula's LaTeX, a vector's
   * label) counts this many bytes against bytesPerBoard: a board holds at most
   * 1 M characters of text (~300 printed pages), far above a lesson's, while
   * strokes keep the full 16 MB. Text is what makes a page costly to lay out
   * and draw (the preview, every participant's page), not its bytes on disk.
   */
  textWeight: 16,
  /** bytes of one element's JSON */
  bytesPerElement: 96 * 1024,
  /** points of a freehand stroke */
  freehandPoints: 4_000,
  /** points of a line or arrow */
  linePoints: 500,
  /** characters of a text element */
  textChars: 10_000,
  /** characters of a formula's LaTeX source */
  latexChars: 2_000,
  /** characters of a vector's label and unit */
  labelChars: 60,
  unitChars: 20,
  /** pages of one board (room for a 50-page PDF import beside the lesson's own pages) and the length of a page name */
  pages: 100,
  pageName: 60,
  /** absolute coordinate bound (scene units) */
  coordinate: 1_000_000,
  /** width/height bound of one element */
  size: 100_000,
} as const;

/** Characters of text an element carries (what BOARD_LIMITS.textWeight weighs). */
function textChars(el: BoardElement): number {
  if (el.type === 'text') return el.text.length;
  if (el.type === 'formula') return el.latex.length;
  if (el.type === 'vector') return el.label.length + el.unit.length;
  return 0;
}

/** What an element costs against bytesPerBoard beyond its JSON bytes: its text, weighted. */
export const textSurcharge = (el: BoardElement): number => (BOARD_LIMITS.textWeight - 1) * textChars(el);
