import { describe, expect, it } from 'vitest';
import { FRAMING, frameOf, type Box } from '../../src/board/render/framing.js';
import { renderPageSvg } from '../../src/board/render/svg.js';
import { ElementSchema, type BoardElement } from '../../src/board/schema.js';
import { busyPage, rect, stroke, text } from './factories.js';

const box = (x: number, y: number, w = 50, h = 50): Box => ({ minX: x, minY: y, maxX: x + w, maxY: y + h });
const mark = (x: number, y: number, anchor = false) => ({ box: box(x, y), anchor });
const viewBox = (els: BoardElement[]) => renderPageSvg(ElementSchema.array().parse(els), { outputWidth: 800 }).svg.match(/viewBox="([^"]+)"/)![1].split(' ').map(Number);

describe('framing a page on the content a person would look at (render/framing.ts)', () => {
  it('leaves a stray mark far from the rest out of the frame, along either axis', () => {
    const content = Array.from({ length: 20 }, (_, i) => mark((i % 5) * 60, Math.floor(i / 5) * 60));
    expect(frameOf([...content, mark(50_000, 0)])).toEqual(frameOf(content));
    expect(frameOf([...content, mark(0, -80_000)])).toEqual(frameOf(content));
    expect(frameOf([...content, mark(90_000, 90_000), mark(-70_000, 30)])).toEqual(frameOf(content));
  });

  it('keeps what is put somewhere on purpose (text, formula, image), and groups of comparable size', () => {
    const content = Array.from({ length: 20 }, (_, i) => mark(i * 60, 0));
    expect(frameOf([...content, mark(50_000, 0, true)])!.maxX).toBe(50_050);
    // two boards' worth of drawing a screen apart: both are content
    const other = Array.from({ length: 6 }, (_, i) => mark(10_000 + i * 60, 0));
    expect(frameOf([...content, ...other])!.maxX).toBe(10_000 + 5 * 60 + 50);
    // close enough to the rest (within one gap) is part of it, however small
    expect(frameOf([...content, mark(20 * 60 + FRAMING.gap - 100, 0)])!.maxX).toBe(20 * 60 + FRAMING.gap - 50);
  });

  it('frames the preview the same way: a stray stroke does not shrink the page into a corner', () => {
    const page = busyPage(50);
    expect(viewBox([...page, stroke('stray', 3, { x: 80_000, y: 60_000, z: 'zz' })])).toEqual(viewBox(page));
  });
});

describe('formulas and vectors in the preview', () => {
  it('are typeset (MathJax paths, as KaTeX shows them on the page), not drawn as their source', () => {
    const formula = { ...rect('f'), type: 'formula', latex: 'x = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}', font_size: 24, width: 300, height: 70 };
    const vector = { ...rect('v'), width: undefined, height: undefined, type: 'vector', dx: 150, dy: -40, label: 'F', magnitude: 5, unit: 'N' };
    const { svg } = renderPageSvg(ElementSchema.array().parse(JSON.parse(JSON.stringify([formula, vector, text('t', 'Label')]))), { outputWidth: 800 });
    // not the source, nor the plain-text approximation the preview drew before ("x = (-b ± √(b²-4ac))/(2a)")
    expect(svg).not.toContain('\\frac');
    expect(svg).not.toContain('√');
    expect(svg).toContain('data-mml-node="mfrac"');
    // the vector's label: an arrow over F, then "= 5 N"
    expect(svg).toContain('data-mml-node="mover"');
    expect((svg.match(/<path /g) ?? []).length).toBeGreaterThan(15);
    expect(svg).toContain('>Label</tspan>');
  });
});
