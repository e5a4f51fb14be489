/**
 * What part of a page a picture of it shows (the preview PNG and each page of
 * the PDF export): "the content a person would look at", not the bounding box
 * of everything, which one stray stroke far away would stretch until the real
 * content is a speck in a corner (docs/board.md, "Framing").
 *
 * The elements are cut into bands along x: elements whose extents come within
 * GAP scene units of each other (about one screen of empty board) share a
 * band. A band is stray when it holds no text, formula or image (what is put
 * somewhere on purpose) and has fewer than STRAY_SHARE times as many elements
 * as the largest band; stray bands leave the frame. The same is done along y
 * with what is left, and again until nothing changes. The frame is the box of
 * the elements kept; an element wholly outside it is not drawn.
 */
export interface Box {
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
}

export interface Framed {
  box: Box;
  /** true when the element is heavy: put somewhere on purpose (text, formula, image), never stray */
  anchor: boolean;
}

export const FRAMING = {
  /** scene units of empty board that separate two bands (about one laptop screen at 100 %) */
  gap: 1_200,
  /** a band without text, formula or image holding fewer than this share of the largest band's elements is stray */
  strayShare: 0.25,
} as const;

function keepAlong(items: Framed[], lo: 'minX' | 'minY', hi: 'maxX' | 'maxY'): Framed[] {
  const sorted = [...items].sort((a, b) => a.box[lo] - b.box[lo]);
  const bands: { items: Framed[]; anchor: boolean }[] = [];
  let end = -Infinity;
  for (const it of sorted) {
    if (!bands.length || it.box[lo] - end > FRAMING.gap) bands.push({ items: [], anchor: false });
    const band = bands[bands.length - 1];
    band.items.push(it);
    band.anchor ||= it.anchor;
    end = Math.max(end, it.box[hi]);
  }
  if (bands.length === 1) return items;
  const largest = Math.max(...bands.map((b) => b.items.length));
  return bands.filter((b) => b.anchor || b.items.length >= largest * FRAMING.strayShare).flatMap((b) => b.items);
}

/** The frame of a page's elements (null when there are none). */
export function frameOf(items: Framed[]): Box | null {
  let kept = items;
  for (let pass = 0; pass < 4; pass++) {
    const before = kept.length;
    kept = keepAlong(keepAlong(kept, 'minX', 'maxX'), 'minY', 'maxY');
    if (kept.length === before) break;
  }
  if (!kept.length) return null;
  const box: Box = { minX: Infinity, minY: Infinity, maxX: -Infinity, maxY: -Infinity };
  for (const { box: b } of kept) {
    box.minX = Math.min(box.minX, b.minX);
    box.minY = Math.min(box.minY, b.minY);
    box.maxX = Math.max(box.maxX, b.maxX);
    box.maxY = Math.max(box.maxY, b.maxY);
  }
  return box;
}

export const intersects = (a: Box, b: Box): boolean => a.minX <= b.maxX && b.minX <= a.maxX && a.minY <= b.maxY && b.minY <= a.maxY;
