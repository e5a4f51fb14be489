/** A rectangle in scene coordinates. */
export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** Room left around what is on the board, so a new card does not touch it. */
const GAP = 16;
/** Step of the search, in scene units (a grid cell of the math/physics boards). */
const STEP = 20;

const overlaps = (a: Box, b: Box) => a.x < b.x + b.width + GAP && b.x < a.x + a.width + GAP && a.y < b.y + b.height + GAP && b.y < a.y + a.height + GAP;
const inside = (a: Box, v: Box) => a.x >= v.x && a.y >= v.y && a.x + a.width <= v.x + v.width && a.y + a.height <= v.y + v.height;

/**
 * Where to put a new formula or vector of `size` so that it covers nothing on
 * the board: the free spot nearest to the middle of what
 * the person sees, searched in rings of STEP around it, within the view.
 * When the view has no room, below everything that is there (the caller
 * scrolls to it). Returns the top-left corner.
 */
export function freeSpot(size: { width: number; height: number }, view: Box, taken: readonly Box[]): { x: number; y: number } {
  const cx = view.x + view.width / 2 - size.width / 2;
  const cy = view.y + view.height / 2 - size.height / 2;
  const near = taken.filter((t) => overlaps(t, { x: view.x - size.width, y: view.y - size.height, width: view.width + 2 * size.width, height: view.height + 2 * size.height }));
  const free = (x: number, y: number) => {
    const box = { x, y, ...size };
    return inside(box, view) && !near.some((t) => overlaps(t, box));
  };
  if (free(cx, cy)) return { x: cx, y: cy };
  const rings = Math.ceil(Math.max(view.width, view.height) / 2 / STEP);
  for (let r = 1; r <= rings; r++) {
    // the ring's cells, nearest to the centre first
    const cells: [number, number][] = [];
    for (let i = -r; i <= r; i++) cells.push([i, -r], [i, r], [-r, i], [r, i]);
    cells.sort((a, b) => Math.hypot(a[0], a[1]) - Math.hypot(b[0], b[1]));
    for (const [i, j] of cells) {
      const x = cx + i * STEP;
      const y = cy + j * STEP;
      if (free(x, y)) return { x, y };
    }
  }
  const bottom = Math.max(...taken.map((t) => t.y + t.height));
  return { x: cx, y: bottom + GAP * 2 };
}
