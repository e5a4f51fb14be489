import type { BoardElement } from '../../src/board/schema.js';

/** Synthetic board pages for the benchmark: elements on a 50-column grid, 40 units apart. */
const style = { stroke: '#1e1e1e', fill: 'transparent', stroke_width: 2, stroke_style: 'solid', fill_style: 'solid', opacity: 100 } as const;

function at(i: number) {
  return { id: `e${i}`, page_id: 'page-1', z: `a${i.toString(36).padStart(4, '0')}`, x: (i % 50) * 40, y: Math.floor(i / 50) * 40, angle: 0, style: { ...style }, locked: false, version: 1, version_nonce: 0 };
}
const stroke = (i: number, n: number): BoardElement => ({ ...at(i), type: 'freehand', points: Array.from({ length: n }, (_, k) => [k * 0.6, Math.round(Math.sin(k / 5) * 12 * 10) / 10] as [number, number]) });
const rect = (i: number): BoardElement => ({ ...at(i), type: 'rectangle', width: 30, height: 20 });
const ellipse = (i: number): BoardElement => ({ ...at(i), type: 'ellipse', width: 30, height: 30 });
const text = (i: number): BoardElement => ({ ...at(i), type: 'text', text: `word ${i}`, font_size: 16, font_family: 'hand', align: 'left', width: 40, height: 20 });
const arrow = (i: number): BoardElement => ({ ...at(i), type: 'arrow', points: [[0, 0], [30, 15]], start_arrowhead: 'none', end_arrowhead: 'arrow' });
const formula = (i: number): BoardElement => ({ ...at(i), type: 'formula', latex: 'x^2 + \\frac{a}{b}', font_size: 16, width: 40, height: 20 });

/** What a tutor's page looks like: mostly handwriting (strokes of ~60 pen points), some shapes, text and formulas. */
export function handwritingPage(n: number): BoardElement[] {
  return Array.from({ length: n }, (_, i) => {
    const k = i % 20;
    return k < 14 ? stroke(i, 60) : k < 16 ? rect(i) : k < 17 ? ellipse(i) : k < 19 ? text(i) : i % 40 === 19 ? formula(i) : arrow(i);
  });
}

/** A harder case: a fifth of the elements are text (text shaping dominates resvg's time). */
export function textHeavyPage(n: number): BoardElement[] {
  return Array.from({ length: n }, (_, i) => [stroke(i, 40), rect(i), ellipse(i), text(i), arrow(i)][i % 5]);
}
