import { describe, expect, it, vi } from 'vitest';
import { ElementSchema, type BoardElement } from '../../src/board/schema.js';
import { fromExcalidraw, toExcalidraw, type ExEl } from '../../web/src/board/convert.js';
import { arrow, rect, stroke, text } from './factories.js';

/**
 * The page's conversion between the board format and the editor's elements
 * (web/src/board/convert.ts): an element read from the server and written back
 * unchanged is the same element, so the editor's own version bumps send nothing
 * (web/src/board/sync.ts compares the two), and every optional field survives.
 */
// The editor's bundle needs a browser to load; the conversion takes only its font numbers from it
// (Excalidraw 0.18's FONT_FAMILY). The editor itself is exercised by the browser tests.
vi.mock('@excalidraw/excalidraw', () => ({
  FONT_FAMILY: { Virgil: 1, Helvetica: 2, Cascadia: 3, Excalifont: 5, Nunito: 6, 'Lilita One': 7, 'Comic Shanns': 8, 'Liberation Sans': 9 },
}));

const roundTrip = (el: BoardElement) => fromExcalidraw(toExcalidraw(el, 1) as ExEl, el.page_id);

describe('the page\'s element conversion', () => {
  it('gives back every element as it was read, with and without the optional fields', () => {
    const els = ElementSchema.array().parse([
      rect('r'),
      rect('rs', { edges: 'sharp' }),
      rect('d', { type: 'diamond' }),
      rect('ds', { type: 'diamond', edges: 'sharp' }),
      rect('e', { type: 'ellipse' }),
      arrow('a'),
      arrow('ar', { edges: 'round', points: [[0, 0], [50, 0], [50, 50]] }),
      arrow('l', { type: 'line', end_arrowhead: 'none' }),
      arrow('lr', { type: 'line', end_arrowhead: 'none', edges: 'round', points: [[0, 0], [50, 0], [50, 50]] }),
      text('t', 'free'),
      text('lbl', 'Label', { container_id: 'r', align: 'center' }),
      text('top', 'Label', { container_id: 'r', align: 'center', vertical_align: 'top' }),
      text('bottom', 'Label', { container_id: 'r', align: 'center', vertical_align: 'bottom' }),
      stroke('s'),
    ]);
    for (const el of els) expect(roundTrip(el), el.id).toEqual(el);
  });

  it('writes edges only where they differ from what the element reads as without them', () => {
    // an element stored before the field: no key appears on its way back
    expect(Object.keys(roundTrip(ElementSchema.parse(rect('r')))!)).not.toContain('edges');
    expect(Object.keys(roundTrip(ElementSchema.parse(arrow('a')))!)).not.toContain('edges');
    expect(Object.keys(roundTrip(ElementSchema.parse(text('lbl', 'x', { container_id: 'r' })))!)).not.toContain('vertical_align');
  });
});
