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
  /** bytes of element JSON on one board (live elements) */
  bytesPerBoard: 16 * 1024 * 1024,
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
  /** pages of one board and the length of a page name */
  pages: 50,
  pageName: 60,
  /** absolute coordinate bound (scene units) */
  coordinate: 1_000_000,
  /** width/height bound of one element */
  size: 100_000,
} as const;
