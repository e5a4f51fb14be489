import { describe, expect, it } from 'vitest';
import { freeSpot, type Box } from '../../web/src/board/placement.js';

const view: Box = { x: 0, y: 0, width: 800, height: 600 };
const size = { width: 200, height: 60 };
const overlap = (a: Box, b: Box) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

describe('freeSpot (where a new formula or vector goes)', () => {
  it('is the middle of the view on an empty board', () => {
    expect(freeSpot(size, view, [])).toEqual({ x: 300, y: 270 });
  });

  it('is near the middle but off whatever is there, and stays in the view', () => {
    const taken: Box[] = [{ x: 250, y: 200, width: 300, height: 200 }];
    const at = { ...freeSpot(size, view, taken), ...size };
    expect(taken.some((t) => overlap(t, at))).toBe(false);
    expect(at.x >= 0 && at.y >= 0 && at.x + at.width <= 800 && at.y + at.height <= 600).toBe(true);
    // the nearest free place: just above or below the block, not a corner
    expect(Math.abs(at.x - 300)).toBeLessThanOrEqual(20);
  });

  it('places one card after another without covering the earlier ones', () => {
    const taken: Box[] = [];
    for (let i = 0; i < 12; i++) taken.push({ ...freeSpot(size, view, taken), ...size });
    for (let i = 0; i < taken.length; i++) for (let j = i + 1; j < taken.length; j++) expect(overlap(taken[i], taken[j]), `${i} ${j}`).toBe(false);
  });

  it('goes below everything when the view is full', () => {
    const taken: Box[] = [{ x: -100, y: -100, width: 1000, height: 800 }];
    expect(freeSpot(size, view, taken)).toEqual({ x: 300, y: 732 });
  });
});
