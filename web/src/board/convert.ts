import { FONT_FAMILY } from '@excalidraw/excalidraw';
import { BOARD_LIMITS } from '../../../src/board/limits.js';
import { edgesOf, type Binding, type BoardElement } from '../../../src/board/schema.js';

/**
 * Excalidraw elements <-> our board format (docs/snapshot-format.md). The
 * server and the snapshot only ever see our format; Excalidraw is the editor.
 * Formulas and physics vectors have no Excalidraw type: they are a rectangle
 * and an arrow carrying `customData`, drawn on top by Overlays.tsx.
 */
// Excalidraw's element type is a large union; the page only needs these fields.
export interface ExEl {
  id: string;
  type: string;
  x: number;
  y: number;
  width: number;
  height: number;
  angle: number;
  strokeColor: string;
  backgroundColor: string;
  fillStyle: string;
  strokeWidth: number;
  strokeStyle: string;
  roughness: number;
  opacity: number;
  index: string | null;
  version: number;
  versionNonce: number;
  isDeleted: boolean;
  locked: boolean;
  points?: readonly (readonly [number, number])[];
  pressures?: readonly number[];
  simulatePressure?: boolean;
  startArrowhead?: string | null;
  endArrowhead?: string | null;
  text?: string;
  originalText?: string;
  fontSize?: number;
  fontFamily?: number;
  textAlign?: string;
  verticalAlign?: string;
  containerId?: string | null;
  startBinding?: ExBinding | null;
  endBinding?: ExBinding | null;
  boundElements?: readonly ExBound[] | null;
  customData?: Record<string, unknown>;
  [k: string]: unknown;
}

/** Excalidraw's PointBinding (an elbow arrow's fixedPoint is not kept: elbow arrows are not either) */
export interface ExBinding {
  elementId: string;
  focus: number;
  gap: number;
  fixedPoint?: readonly [number, number] | null;
}
/** An entry of a container's `boundElements`: a label (text) or an arrow attached to it */
export interface ExBound {
  id: string;
  type: 'text' | 'arrow';
}

export type FormulaData = { kind: 'formula'; latex: string; fontSize: number };
export type VectorData = { kind: 'vector'; label: string; magnitude: number | null; unit: string };

const SYNCED = new Set(['freedraw', 'rectangle', 'ellipse', 'diamond', 'line', 'arrow', 'text', 'image']);
export const isSyncable = (el: ExEl): boolean => SYNCED.has(el.type);

/** Coordinates are kept to 1/100 of a scene unit: invisible at any zoom, and it halves a stroke's size on the wire. */
const clampNum = (v: number, lim = 1_000_000) => (Number.isFinite(v) ? Math.round(Math.max(-lim, Math.min(lim, v)) * 100) / 100 : 0);
const colour = (c: string): string => (/^#[0-9a-fA-F]{6}$/.test(c) ? c.toLowerCase() : c === 'transparent' ? 'transparent' : expand(c));
function expand(c: string): string {
  const m = /^#([0-9a-fA-F])([0-9a-fA-F])([0-9a-fA-F])$/.exec(c);
  return m ? `#${m[1]}${m[1]}${m[2]}${m[2]}${m[3]}${m[3]}`.toLowerCase() : '#1e1e1e';
}
const HEAD_TO_OURS: Record<string, 'none' | 'arrow' | 'triangle' | 'dot' | 'bar'> = {
  arrow: 'arrow', triangle: 'triangle', triangle_outline: 'triangle', bar: 'bar', dot: 'dot', circle: 'dot', circle_outline: 'dot', diamond: 'triangle', diamond_outline: 'triangle',
};
const FONT_TO_OURS = (f?: number): 'hand' | 'sans' | 'code' =>
  f === FONT_FAMILY.Cascadia || f === FONT_FAMILY['Comic Shanns'] ? 'code' : f === FONT_FAMILY.Nunito || f === FONT_FAMILY.Helvetica || f === FONT_FAMILY['Liberation Sans'] ? 'sans' : 'hand';
const OURS_TO_FONT = { hand: FONT_FAMILY.Excalifont, sans: FONT_FAMILY.Nunito, code: FONT_FAMILY['Comic Shanns'] };

const ID = /^[A-Za-z0-9_-]{1,64}$/;
/** A reference to another element, when it is one the board can store. */
const ref = (id: unknown, self: string): string | undefined => (typeof id === 'string' && ID.test(id) && id !== self ? id : undefined);
function bindingFrom(b: ExBinding | null | undefined, self: string): Binding | undefined {
  const id = ref(b?.elementId, self);
  if (!b || !id) return undefined;
  const focus = Number.isFinite(b.focus) ? Math.round(Math.max(-1, Math.min(1, b.focus)) * 10_000) / 10_000 : 0;
  return { element_id: id, focus, gap: clampNum(Math.max(0, b.gap || 0), 100_000) };
}
const bindingTo = (b: Binding | undefined): ExBinding | null => (b ? { elementId: b.element_id, focus: b.focus, gap: b.gap } : null);

/**
 * What is attached to each element (Excalidraw's `boundElements`), derived
 * from the elements that point at it: a label's `container_id`, an arrow's
 * bindings. The board stores the relation once, on the label and the arrow,
 * so the two sides can never disagree, whatever order concurrent writes land
 * in (docs/snapshot-format.md, "Labels and attached arrows").
 */
export function boundIndex(elements: Iterable<BoardElement>): Map<string, ExBound[]> {
  const out = new Map<string, ExBound[]>();
  const add = (target: string, b: ExBound) => {
    const list = out.get(target);
    if (!list) out.set(target, [b]);
    else if (!list.some((x) => x.id === b.id)) list.push(b);
  };
  for (const el of elements) {
    if (el.type === 'text' && el.container_id) add(el.container_id, { id: el.id, type: 'text' });
    else if (el.type === 'arrow' || el.type === 'line') {
      if (el.start_binding) add(el.start_binding.element_id, { id: el.id, type: 'arrow' });
      if (el.end_binding) add(el.end_binding.element_id, { id: el.id, type: 'arrow' });
    }
  }
  return out;
}

/** The same set of attached elements (order aside)? */
export function sameBound(a: readonly ExBound[] | null | undefined, b: readonly ExBound[] | null | undefined): boolean {
  const x = a ?? [];
  const y = b ?? [];
  return x.length === y.length && x.every((e) => y.some((f) => f.id === e.id && f.type === e.type));
}

/**
 * A rectangle's, diamond's, line's or arrow's `edges` from the editor's roundness, written only
 * where it differs from what the element reads as without it (edgesOf): an element stored before
 * the field comes back unchanged, so the editor's own version bumps send nothing.
 */
function edgesField(ex: ExEl): { edges?: 'sharp' | 'round' } {
  const drawn = ex.roundness ? 'round' : 'sharp';
  return drawn === edgesOf({ type: ex.type }) ? {} : { edges: drawn };
}

/** Our element for an Excalidraw element on `pageId`; null for what the board does not store (frames, embeds...). */
export function fromExcalidraw(ex: ExEl, pageId: string): BoardElement | null {
  if (!isSyncable(ex)) return null;
  const base = {
    id: ex.id,
    page_id: pageId,
    z: ex.index && /^[0-9A-Za-z]{1,80}$/.test(ex.index) ? ex.index : 'a0',
    x: clampNum(ex.x),
    y: clampNum(ex.y),
    angle: Math.max(-10, Math.min(10, ex.angle || 0)),
    style: {
      stroke: colour(ex.strokeColor),
      fill: colour(ex.backgroundColor),
      stroke_width: Math.max(0.5, Math.min(32, ex.strokeWidth || 1)),
      stroke_style: (['solid', 'dashed', 'dotted'].includes(ex.strokeStyle) ? ex.strokeStyle : 'solid') as 'solid',
      fill_style: (ex.fillStyle === 'solid' ? 'solid' : ex.fillStyle === 'cross-hatch' ? 'cross-hatch' : 'hachure') as 'solid',
      opacity: Math.round(Math.max(0, Math.min(100, ex.opacity ?? 100))),
    },
    locked: !!ex.locked,
    // the editor's own version stamp travels as is: the server keeps the newer write (docs/board.md, "Sync model")
    version: Math.max(1, Math.min(2 ** 31 - 1, Math.trunc(ex.version) || 1)),
    version_nonce: Math.trunc(ex.versionNonce) | 0,
  };
  const size = { width: clampNum(Math.abs(ex.width), 100_000), height: clampNum(Math.abs(ex.height), 100_000) };
  const data = ex.customData as { kind?: string; latex?: string; fontSize?: number; label?: string; magnitude?: number | null; unit?: string } | undefined;
  switch (ex.type) {
    case 'freedraw': {
      const pts = (ex.points ?? [[0, 0]]).slice(0, 4000);
      const pr = ex.simulatePressure ? undefined : ex.pressures;
      return { ...base, type: 'freehand', points: pts.map((p, i) => (pr && pr[i] !== undefined ? [clampNum(p[0]), clampNum(p[1]), Math.round(Math.max(0, Math.min(1, pr[i])) * 100) / 100] : [clampNum(p[0]), clampNum(p[1])])) as [number, number][] };
    }
    case 'rectangle':
      if (data?.kind === 'formula') {
        // the proxy rectangle is an invisible white card; the formula's own colour travels in customData
        const c = typeof (data as { color?: unknown }).color === 'string' ? colour((data as { color: string }).color) : '#1e1e1e';
        return { ...base, ...size, style: { ...base.style, stroke: c === 'transparent' ? '#1e1e1e' : c, fill: 'transparent' }, type: 'formula', latex: String(data.latex || 'x').slice(0, 2000), font_size: Number(data.fontSize) || 24 };
      }
      return { ...base, ...size, type: 'rectangle', ...edgesField(ex) };
    case 'ellipse':
      return { ...base, ...size, type: 'ellipse' };
    case 'diamond':
      return { ...base, ...size, type: 'diamond', ...edgesField(ex) };
    case 'line':
    case 'arrow': {
      const pts = (ex.points ?? []).slice(0, BOARD_LIMITS.linePoints).map((p) => [clampNum(p[0]), clampNum(p[1])] as [number, number]);
      if (pts.length < 2) pts.push([0, 0], [1, 1]);
      if (data?.kind === 'vector' && ex.type === 'arrow') {
        const last = pts[pts.length - 1];
        return { ...base, type: 'vector', dx: last[0], dy: last[1], label: String(data.label ?? '').slice(0, 60), magnitude: typeof data.magnitude === 'number' ? data.magnitude : null, unit: String(data.unit ?? '').slice(0, 20) };
      }
      const startBinding = bindingFrom(ex.startBinding, ex.id);
      const endBinding = bindingFrom(ex.endBinding, ex.id);
      return {
        ...base,
        type: ex.type,
        points: pts,
        start_arrowhead: HEAD_TO_OURS[ex.startArrowhead ?? ''] ?? 'none',
        end_arrowhead: HEAD_TO_OURS[ex.endArrowhead ?? ''] ?? 'none',
        // a free end has no field at all: elements drawn before bindings were kept read as before
        ...(startBinding ? { start_binding: startBinding } : {}),
        ...(endBinding ? { end_binding: endBinding } : {}),
        // an elbow arrow has no roundness: stored as a sharp one through its points
        ...edgesField(ex),
      };
    }
    case 'image': {
      const fileId = typeof ex.fileId === 'string' && /^[0-9a-f]{64}$/.test(ex.fileId) ? ex.fileId : null;
      if (!fileId) return null;
      const sc = (ex.scale as [number, number] | undefined) ?? [1, 1];
      const crop = ex.crop as { x: number; y: number; width: number; height: number; naturalWidth: number; naturalHeight: number } | null | undefined;
      const px = (v: number) => clampNum(Math.max(0, v), 100_000);
      return {
        ...base,
        ...size,
        type: 'image',
        file_id: fileId,
        // `error` is the editor's own note that a file did not load here: not a change of the element
        status: ex.status === 'pending' ? 'pending' : 'saved',
        scale: [sc[0] < 0 ? -1 : 1, sc[1] < 0 ? -1 : 1],
        crop: crop ? { x: px(crop.x), y: px(crop.y), width: px(crop.width), height: px(crop.height), natural_width: px(crop.naturalWidth), natural_height: px(crop.naturalHeight) } : null,
      };
    }
    case 'text': {
      const container = ref(ex.containerId, ex.id);
      return {
        ...base,
        ...size,
        type: 'text',
        text: (ex.originalText || ex.text || ' ').slice(0, 10_000),
        font_size: Math.max(4, Math.min(400, ex.fontSize ?? 20)),
        font_family: FONT_TO_OURS(ex.fontFamily),
        align: (['left', 'center', 'right'].includes(ex.textAlign ?? '') ? ex.textAlign : 'left') as 'left',
        ...(container ? { container_id: container } : {}),
        // a label's place in its shape's height; the middle (Excalidraw's default) is not written
        ...(container && (ex.verticalAlign === 'top' || ex.verticalAlign === 'bottom') ? { vertical_align: ex.verticalAlign } : {}),
      };
    }
  }
  return null;
}

/**
 * An Excalidraw element (skeleton: restoreElements fills the rest) for one of
 * ours, with its version stamp. `bound`: what is attached to it (boundIndex
 * of the elements shown with it), so the editor moves labels and arrows with it.
 */
export function toExcalidraw(el: BoardElement, roughness: number, bound: readonly ExBound[] | null = null): Partial<ExEl> & { id: string; type: string } {
  const common = {
    id: el.id,
    x: el.x,
    y: el.y,
    angle: el.angle,
    strokeColor: el.style.stroke,
    backgroundColor: el.style.fill,
    fillStyle: el.style.fill_style,
    strokeWidth: el.style.stroke_width,
    strokeStyle: el.style.stroke_style,
    opacity: el.style.opacity,
    roughness,
    index: el.z,
    locked: el.locked,
    version: el.version,
    versionNonce: el.version_nonce,
    isDeleted: false,
    groupIds: [],
    frameId: null,
    boundElements: bound?.length ? bound.map((b) => ({ ...b })) : null,
    link: null,
    updated: Date.now(),
  };
  switch (el.type) {
    case 'freehand': {
      const hasPressure = el.points.some((p) => p.length === 3);
      const xs = el.points.map((p) => p[0]);
      const ys = el.points.map((p) => p[1]);
      return {
        ...common,
        type: 'freedraw',
        points: el.points.map((p) => [p[0], p[1]] as [number, number]),
        pressures: hasPressure ? el.points.map((p) => p[2] ?? 0.5) : [],
        simulatePressure: !hasPressure,
        width: Math.max(...xs) - Math.min(...xs),
        height: Math.max(...ys) - Math.min(...ys),
        lastCommittedPoint: null,
      };
    }
    case 'rectangle':
    case 'ellipse':
    case 'diamond':
      // Excalidraw's adaptive radius for a rectangle, proportional for the others
      return { ...common, type: el.type, width: el.width, height: el.height, roundness: edgesOf(el) === 'sharp' ? null : el.type === 'rectangle' ? { type: 3 } : { type: 2 } };
    case 'formula':
      // a white card: clickable anywhere (Excalidraw hit-tests transparent shapes on their outline only)
      return { ...common, type: 'rectangle', strokeColor: 'transparent', backgroundColor: '#ffffff', fillStyle: 'solid', width: el.width, height: el.height, roundness: null, customData: { kind: 'formula', latex: el.latex, fontSize: el.font_size, color: el.style.stroke } };
    case 'line':
    case 'arrow': {
      const xs = el.points.map((p) => p[0]);
      const ys = el.points.map((p) => p[1]);
      const head = (h: string) => (h === 'none' ? null : h);
      return { ...common, type: el.type, points: el.points, width: Math.max(...xs) - Math.min(...xs), height: Math.max(...ys) - Math.min(...ys), startArrowhead: head(el.start_arrowhead), endArrowhead: head(el.end_arrowhead), roundness: edgesOf(el) === 'round' ? { type: 2 } : null, lastCommittedPoint: null, startBinding: bindingTo(el.start_binding), endBinding: bindingTo(el.end_binding) };
    }
    case 'vector':
      return { ...common, type: 'arrow', points: [[0, 0], [el.dx, el.dy]], width: Math.abs(el.dx), height: Math.abs(el.dy), startArrowhead: null, endArrowhead: 'triangle', roundness: null, lastCommittedPoint: null, startBinding: null, endBinding: null, customData: { kind: 'vector', label: el.label, magnitude: el.magnitude, unit: el.unit } };
    case 'image':
      return {
        ...common,
        type: 'image',
        width: el.width,
        height: el.height,
        fileId: el.file_id,
        status: el.status,
        scale: [...el.scale],
        crop: el.crop ? { x: el.crop.x, y: el.crop.y, width: el.crop.width, height: el.crop.height, naturalWidth: el.crop.natural_width, naturalHeight: el.crop.natural_height } : null,
      };
    case 'text':
      // a label sits where its author put it in the shape's height (the middle unless said; the x, y sent are where it is)
      return { ...common, type: 'text', text: el.text, originalText: el.text, fontSize: el.font_size, fontFamily: OURS_TO_FONT[el.font_family], textAlign: el.align, verticalAlign: el.container_id ? (el.vertical_align ?? 'middle') : 'top', width: el.width, height: el.height, containerId: el.container_id ?? null, autoResize: true, lineHeight: 1.25 };
  }
}
