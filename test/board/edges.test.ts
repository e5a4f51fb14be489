import { describe, expect, it } from 'vitest';
import { renderPageSvg } from '../../src/board/render/svg.js';
import { BoardOpSchema, ElementSchema, forNode, type BoardElement } from '../../src/board/schema.js';
import { arrow, rect, text } from './factories.js';

/**
 * Corners and bends (docs/snapshot-format.md, `edges`): a rectangle's or diamond's corners and a
 * line's or arrow's bends are kept as drawn, sharp or round, and the preview draws them so.
 */
/** An arrow from (100, 100) right 200, then down 200: one bend. */
const line = (id: string, o: Record<string, unknown> = {}) => arrow(id, { x: 100, y: 100, points: [[0, 0], [200, 0], [200, 200]], ...o });
const svgOf = (els: BoardElement[]) => renderPageSvg(ElementSchema.array().parse(els), { outputWidth: 800 }).svg;

describe('corners and bends (edges) in the board format', () => {
  it('keeps sharp or round on rectangles, diamonds, lines and arrows; an element without the field reads as before', () => {
    expect(ElementSchema.parse(rect('r', { edges: 'sharp' }))).toMatchObject({ edges: 'sharp' });
    expect(ElementSchema.parse(rect('d', { type: 'diamond', edges: 'round' }))).toMatchObject({ edges: 'round' });
    expect(ElementSchema.parse(line('a', { edges: 'round' }))).toMatchObject({ edges: 'round' });
    expect(ElementSchema.parse(line('l', { type: 'line', edges: 'sharp' }))).toMatchObject({ edges: 'sharp' });
    expect(Object.keys(ElementSchema.parse(rect('r')))).not.toContain('edges');
    expect(Object.keys(ElementSchema.parse(line('a')))).not.toContain('edges');
    for (const bad of [rect('r', { edges: 'rounded' }), line('a', { edges: true }), text('t', 'x', { edges: 'round' }), rect('e', { type: 'ellipse', edges: 'round' })]) {
      expect(BoardOpSchema.safeParse({ type: 'element.add', elements: [bad] }).success, JSON.stringify(bad)).toBe(false);
    }
  });

  it('draws them in the preview as the editor does: a sharp rectangle and diamond without rounded corners, a round one with them, a round arrow as a curve through its points', () => {
    expect(svgOf([rect('r', { edges: 'sharp' })])).not.toContain(' rx=');
    // stored before the field: round, as it was shown; the editor's radius, a quarter of the shorter side up to 32
    expect(svgOf([rect('r', { width: 200, height: 100 })])).toContain(' rx="25"');
    expect(svgOf([rect('r', { width: 400, height: 300, edges: 'round' })])).toContain(' rx="32"');
    expect(svgOf([rect('d', { type: 'diamond', edges: 'sharp' })])).toContain('<polygon');
    const diamond = svgOf([rect('d', { type: 'diamond', x: 0, y: 0, width: 200, height: 100 })]);
    expect(diamond).not.toContain('<polygon');
    expect(/<path d="(M[^"]*)"/.exec(diamond)![1]).toBe('M125 12.5L175 37.5C200 50 200 50 175 62.5L125 87.5C100 100 100 100 75 87.5L25 62.5C0 50 0 50 25 37.5L75 12.5C100 0 100 0 125 12.5Z');
    const sharp = svgOf([line('a')]);
    expect(sharp).toContain('<polyline points="100,100 300,100 300,300"');
    const round = svgOf([line('a', { edges: 'round' })]);
    expect(round).not.toContain('<polyline points="100,100');
    const d = /<path d="([^"]*)" fill="none"/.exec(round)![1];
    // two cubic segments, through the bend and to the end
    expect(d.match(/C/g)).toHaveLength(2);
    expect(d).toMatch(/^M100 100C.* 300 100C.* 300 300$/);
    // the head points along the curve's end, straight down as the last leg runs: its barbs level,
    // either side of the tip (300, 300)
    const [[x1, y1], tip, [x2, y2]] = /<polyline fill="none" points="([^"]*)"/.exec(round)![1].split(' ').map((p) => p.split(',').map(Number));
    expect(tip).toEqual([300, 300]);
    expect(y1).toBeCloseTo(y2, 5);
    expect(x1 - 300).toBeCloseTo(300 - x2, 5);
  });

  it('counts a round line\'s points twice in the render budget (resvg flattens each into a curve)', () => {
    const zigzag = Array.from({ length: 500 }, (_, k) => [(k % 2) * 1, k * 0.2] as [number, number]);
    const page = (edges: 'sharp' | 'round') => Array.from({ length: 200 }, (_, i) => line(`l${i}`, { type: 'line', x: i * 3, points: zigzag, edges, end_arrowhead: 'none' }));
    // 100,000 points: within RENDER_BUDGET.points (150,000) sharp, not round
    const sharp = renderPageSvg(ElementSchema.array().parse(page('sharp')), { outputWidth: 800 });
    expect((sharp.svg.match(/<polyline points/g) ?? []).length).toBe(200);
    const round = renderPageSvg(ElementSchema.array().parse(page('round')), { outputWidth: 800 });
    expect(round.approximate).toBe(true);
    expect((round.svg.match(/<path d="M/g) ?? []).length).toBe(150);
  });

  it('leaves out of what a page sends the optional fields its node does not list, and nothing else', () => {
    const r = ElementSchema.parse(rect('r', { edges: 'sharp' }));
    const t = ElementSchema.parse(text('t', 'x', { container_id: 'r', vertical_align: 'top' }));
    expect(forNode(r, new Set(['vertical_align', 'edges']))).toBe(r); // the same object: nothing to leave out
    expect(forNode(r, new Set())).toEqual({ ...r, edges: undefined });
    expect(Object.keys(forNode(r, new Set()))).not.toContain('edges');
    // a node from before the list keeps the older optional fields (container_id)
    expect(forNode(t, new Set(['edges']))).toEqual(ElementSchema.parse(text('t', 'x', { container_id: 'r' })));
    expect(r.edges).toBe('sharp'); // the page's own copy is left as it is
  });
});
