import type { BoardElement } from '../../src/board/schema.js';

/** Elements in the board format (docs/snapshot-format.md), with every default filled in. */
const style = { stroke: '#1e1e1e', fill: 'transparent', stroke_width: 2, stroke_style: 'solid', fill_style: 'solid', opacity: 100 } as const;

type Fields = Record<string, unknown>;
/** Every element starts at version 1 (nonce 0); a test that changes one sends a higher version. */
const v1 = { version: 1, version_nonce: 0 } as const;

export function rect(id: string, o: Fields = {}): BoardElement {
  return { id, page_id: 'page-1', z: 'a0', x: 10, y: 20, angle: 0, style: { ...style }, locked: false, ...v1, type: 'rectangle', width: 100, height: 50, ...o } as BoardElement;
}

export function stroke(id: string, points = 20, o: Fields = {}): BoardElement {
  const pts = Array.from({ length: points }, (_, i) => [i * 3, Math.round(Math.sin(i / 3) * 20)] as [number, number]);
  return { id, page_id: 'page-1', z: 'a1', x: 0, y: 0, angle: 0, style: { ...style, stroke: '#e03131' }, locked: false, ...v1, type: 'freehand', points: pts, ...o } as BoardElement;
}

export function text(id: string, t: string, o: Fields = {}): BoardElement {
  return { id, page_id: 'page-1', z: 'a2', x: 0, y: 100, angle: 0, style: { ...style }, locked: false, ...v1, type: 'text', text: t, font_size: 20, font_family: 'hand', align: 'left', width: 200, height: 25, ...o } as BoardElement;
}

/** An arrow (or, with `type: 'line'`, a line) along its points from (x, y). */
export function arrow(id: string, o: Fields = {}): BoardElement {
  return { id, page_id: 'page-1', z: 'a3', x: 110, y: 45, angle: 0, style: { ...style }, locked: false, ...v1, type: 'arrow', points: [[0, 0], [90, 0]], start_arrowhead: 'none', end_arrowhead: 'arrow', ...o } as BoardElement;
}

/** A page of `count` mixed elements, like a busy lesson (used by the preview test and bench/board). */
export function busyPage(count: number, pageId = 'page-1'): BoardElement[] {
  const out: BoardElement[] = [];
  for (let i = 0; i < count; i++) {
    const x = (i % 50) * 40;
    const y = Math.floor(i / 50) * 40;
    const z = `a${i.toString(36).padStart(4, '0')}`;
    const k = i % 5;
    if (k === 0) out.push(stroke(`s${i}`, 40, { page_id: pageId, x, y, z }));
    else if (k === 1) out.push(rect(`r${i}`, { page_id: pageId, x, y, z, width: 30, height: 20 }));
    else if (k === 2) out.push({ ...rect(`e${i}`, { page_id: pageId, x, y, z, width: 30, height: 30 }), type: 'ellipse' } as BoardElement);
    else if (k === 3) out.push(text(`t${i}`, `x${i}`, { page_id: pageId, x, y, z }));
    else out.push({ id: `a${i}`, page_id: pageId, z, x, y, angle: 0, style: { ...style }, locked: false, ...v1, type: 'arrow', points: [[0, 0], [30, 15]], start_arrowhead: 'none', end_arrowhead: 'arrow' });
  }
  return out;
}

/** The tombstone of a delete: the element's id and the version of the delete. */
export const del = (id: string, version = 2, version_nonce = 0) => ({ id, version, version_nonce });

/** An image of the lesson's file `fileId` (saved unless said). */
export function image(id: string, fileId: string, o: Fields = {}): BoardElement {
  return { id, page_id: 'page-1', z: 'a4', x: 40, y: 40, angle: 0, style: { ...style }, locked: false, ...v1, type: 'image', width: 160, height: 120, file_id: fileId, status: 'saved', scale: [1, 1], crop: null, ...o } as BoardElement;
}
