import { describe, expect, it } from 'vitest';
import { BoardWork, referencedElementIds, type ElementState } from '../../src/board/apply.js';
import { BoardOpError } from '../../src/board/errors.js';
import { renderPageSvg } from '../../src/board/render/svg.js';
import { textWidthEm } from '../../src/board/render/wrap.js';
import { BoardOpSchema, ElementSchema, elementRefs, type BoardElement } from '../../src/board/schema.js';
import { arrow, rect, text } from './factories.js';

/**
 * Labels inside shapes and arrows attached to shapes in the board format
 * (docs/snapshot-format.md, "Labels and attached arrows"): what the schema
 * accepts, and the server's rule that a reference stays on its element's page.
 */
const teacher = { role: 'teacher' as const };
const label = (id: string, container: string, o: Record<string, unknown> = {}) => text(id, 'Label', { container_id: container, align: 'center', x: 35, y: 32, width: 50, height: 25, ...o });
const binding = (element_id: string, o: Record<string, unknown> = {}) => ({ element_id, focus: 0.25, gap: 4, ...o });

const st = (page_id: string, o: Partial<ElementState> = {}): ElementState => ({ page_id, deleted: false, bytes: 100, version: 1, version_nonce: 0, locked: false, ...o });
function board(elements: [string, ElementState][] = []) {
  const head = { seq: 0, pages: [{ id: 'page-1', name: 'Page 1' }, { id: 'page-2', name: 'Page 2' }], pinned_page_id: null, live_elements: elements.length, live_bytes: 100 * elements.length, first_content_seq: null };
  return new BoardWork(head, new Map(elements));
}
function refused(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof BoardOpError) return `${err.code}: ${err.message}`;
    throw err;
  }
  throw new Error('operation was not refused');
}

describe('labels and attached arrows in the board format', () => {
  it('keeps a label\'s container_id and an arrow\'s bindings through the schema, and adds nothing to elements without them', () => {
    expect(ElementSchema.parse(label('t', 'r'))).toMatchObject({ container_id: 'r' });
    expect(ElementSchema.parse(label('t', 'r', { vertical_align: 'top' }))).toMatchObject({ vertical_align: 'top' });
    const a = ElementSchema.parse(arrow('a', { start_binding: binding('r1'), end_binding: binding('r2', { focus: -1, gap: 0 }) }));
    expect(a).toMatchObject({ start_binding: { element_id: 'r1', focus: 0.25, gap: 4 }, end_binding: { element_id: 'r2', focus: -1, gap: 0 } });
    // an element stored before the fields existed reads exactly as before: no key appears
    expect(Object.keys(ElementSchema.parse(text('t', 'free')))).not.toContain('container_id');
    expect(Object.keys(ElementSchema.parse(label('t', 'r')))).not.toContain('vertical_align'); // absent: the middle
    expect(Object.keys(ElementSchema.parse(arrow('a')))).not.toContain('start_binding');
    expect(elementRefs(ElementSchema.parse(label('t', 'r')))).toEqual(['r']);
    expect(elementRefs(a)).toEqual(['r1', 'r2']);
    expect(elementRefs(rect('r'))).toEqual([]);
  });

  it('refuses malformed references: ids, focus outside -1..1, a negative or huge gap, unknown binding keys, a binding on a shape, a vertical align other than a label\'s top, middle or bottom', () => {
    const bad: BoardElement[] = [
      label('t', 'bad id!'),
      label('t', 'x'.repeat(65)),
      label('t', ''),
      arrow('a', { start_binding: binding('r', { focus: 1.5 }) }),
      arrow('a', { end_binding: binding('r', { gap: -1 }) }),
      arrow('a', { end_binding: binding('r', { gap: 1e9 }) }),
      arrow('a', { end_binding: binding('r', { focus: Number.NaN }) }),
      arrow('a', { end_binding: { ...binding('r'), fixed_point: [0.5, 0.5] } }),
      arrow('a', { end_binding: 'r' }),
      rect('r', { container_id: 'x' }),
      label('t', 'r', { vertical_align: 'center' }),
      label('t', 'r', { vertical_align: 'middle' }), // the middle is written as no field
      text('t', 'free', { vertical_align: 'top' }), // only a label has one
      rect('r', { vertical_align: 'top' }),
      rect('r', { start_binding: binding('x') }),
    ];
    for (const el of bad) expect(BoardOpSchema.safeParse({ type: 'element.add', elements: [el] }).success, JSON.stringify(el)).toBe(false);
  });

  it('accepts a label and an arrow pointing at elements of their page, in the same operation or stored', () => {
    const w = board([['r1', st('page-1')]]);
    const applied = w.apply({ type: 'element.add', elements: [rect('r2', { x: 200 }), label('t', 'r1'), arrow('a', { start_binding: binding('r1'), end_binding: binding('r2') })] }, teacher);
    expect(applied?.seq).toBe(1);
    expect(w.writes.get('t')?.data).toMatchObject({ container_id: 'r1' });
    expect(w.writes.get('a')?.data).toMatchObject({ start_binding: { element_id: 'r1' }, end_binding: { element_id: 'r2' } });
  });

  it('keeps a dangling reference (unknown or deleted element): it may arrive later or come back by an undo', () => {
    const w = board([['gone', st('page-2', { deleted: true })]]);
    expect(w.apply({ type: 'element.add', elements: [label('t', 'nowhere'), arrow('a', { end_binding: binding('gone') })] }, teacher)?.seq).toBe(1);
    // and the preview draws it like any text and arrow
    const svg = renderPageSvg(ElementSchema.array().parse([label('t', 'nowhere'), arrow('a', { end_binding: binding('gone') })]), { outputWidth: 400 });
    expect(svg.svg).toContain('Label');
  });

  it('draws a long label in the preview wrapped to its box, in the middle of its shape; a free text stays as typed', () => {
    const typed = 'Homework for Monday: exercises four to nine';
    // as the editor stores it: the shape 200 x 120, the label's box 174 x 75 (three lines of 20 px)
    const page = ElementSchema.array().parse([
      rect('r', { x: 450, y: 250, width: 200, height: 120 }),
      label('t', 'r', { text: typed, x: 462.85, y: 272.5, width: 174.3, height: 75, font_size: 20 }),
      text('free', typed, { x: 0, y: 500, width: 420, height: 25, font_size: 20 }),
    ]);
    const svg = renderPageSvg(page, { outputWidth: 800 }).svg;
    const texts = [...svg.matchAll(/<text [^>]*>(.*?)<\/text>/g)].map((m) => [...m[1].matchAll(/<tspan[^>]*>(.*?)<\/tspan>/g)].map((s) => s[1]));
    const [labelLines, freeLines] = texts;
    expect(labelLines.length).toBeGreaterThanOrEqual(2);
    expect(labelLines.join(' ')).toBe(typed); // every word, in order
    for (const l of labelLines) expect(textWidthEm(l) * 20).toBeLessThanOrEqual(174.3 + 1);
    // the lines' middle is the shape's middle (310), as the editor centres a label
    const y = Number(/<text x="[^"]*" y="([^"]*)"[^>]*>.*?Homework/.exec(svg)![1]);
    expect(Math.abs(y + (labelLines.length * 20 * 1.25) / 2 - 310)).toBeLessThanOrEqual(1);
    expect(freeLines).toEqual([typed]);
  });

  it('refuses a reference to an element on another page, or to the element itself; nothing is applied', () => {
    const w = board([['r', st('page-2')]]);
    expect(refused(() => w.apply({ type: 'element.add', elements: [label('t', 'r')] }, teacher))).toMatch(/^invalid: .*another page/);
    expect(refused(() => w.apply({ type: 'element.add', elements: [arrow('a', { end_binding: binding('r') })] }, teacher))).toMatch(/^invalid/);
    // the other page's element in the same operation
    expect(refused(() => w.apply({ type: 'element.add', elements: [rect('r2', { page_id: 'page-2' }), label('t', 'r2')] }, teacher))).toMatch(/^invalid/);
    expect(refused(() => w.apply({ type: 'element.add', elements: [label('t', 't')] }, teacher))).toMatch(/^invalid: .*itself/);
    expect(refused(() => w.apply({ type: 'element.update', elements: [arrow('a', { start_binding: binding('a') })] }, teacher))).toMatch(/^invalid/);
    expect(w.head.seq).toBe(0);
    expect(w.writes.size).toBe(0);
  });

  it('has the store load the elements a batch refers to, so the page rule sees them', () => {
    expect(referencedElementIds([{ type: 'element.add', elements: [label('t', 'r1'), arrow('a', { start_binding: binding('r2'), end_binding: binding('r1') })] }]).sort()).toEqual(['a', 'r1', 'r2', 't']);
  });
});
