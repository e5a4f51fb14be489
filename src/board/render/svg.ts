import type { BoardElement } from '../schema.js';
import { latexToText } from './latex.js';

/**
 * One board page as an SVG document, for the server-side preview (rendered to
 * PNG by resvg, src/board/render/png.ts). The view fits the page's content with
 * a margin; elements are drawn in stacking order. Geometry follows the
 * element format (docs/snapshot-format.md): points are relative to (x, y),
 * rotation is around the element's centre.
 */
export interface PageSvg {
  svg: string;
  width: number;
  height: number;
}

// Generic families only: png.ts maps them to the fonts it loaded.
const FONTS: Record<string, string> = { hand: 'sans-serif', sans: 'sans-serif', code: 'monospace', math: 'serif' };
const LINE_HEIGHT = 1.25;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
/**
 * Coordinates are rounded to what the thumbnail can show: whole scene units
 * when the page is shrunk (the usual case; integers also format much faster
 * than floats), tenths otherwise. Set per render (renders are synchronous).
 */
let unit = 10;
const n = (v: number) => String(Math.round(v * unit) / unit);

interface Box {
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
}

/** The element's box before rotation, relative to the scene. */
function localBox(el: BoardElement): Box {
  switch (el.type) {
    case 'freehand':
    case 'line':
    case 'arrow': {
      let minX = 0, minY = 0, maxX = 0, maxY = 0;
      for (const p of el.points) {
        minX = Math.min(minX, p[0]);
        minY = Math.min(minY, p[1]);
        maxX = Math.max(maxX, p[0]);
        maxY = Math.max(maxY, p[1]);
      }
      return { minX: el.x + minX, minY: el.y + minY, maxX: el.x + maxX, maxY: el.y + maxY };
    }
    case 'vector':
      return { minX: el.x + Math.min(0, el.dx), minY: el.y + Math.min(0, el.dy), maxX: el.x + Math.max(0, el.dx), maxY: el.y + Math.max(0, el.dy) };
    default:
      return { minX: el.x, minY: el.y, maxX: el.x + el.width, maxY: el.y + el.height };
  }
}

function rotatedBox(el: BoardElement): Box {
  const b = localBox(el);
  const pad = el.style.stroke_width * 2 + (el.type === 'vector' ? 24 : 0);
  if (!el.angle) return { minX: b.minX - pad, minY: b.minY - pad, maxX: b.maxX + pad, maxY: b.maxY + pad };
  const cx = (b.minX + b.maxX) / 2;
  const cy = (b.minY + b.maxY) / 2;
  const cos = Math.cos(el.angle);
  const sin = Math.sin(el.angle);
  const xs: number[] = [];
  const ys: number[] = [];
  for (const [x, y] of [[b.minX, b.minY], [b.maxX, b.minY], [b.minX, b.maxY], [b.maxX, b.maxY]]) {
    xs.push(cx + (x - cx) * cos - (y - cy) * sin);
    ys.push(cy + (x - cx) * sin + (y - cy) * cos);
  }
  return { minX: Math.min(...xs) - pad, minY: Math.min(...ys) - pad, maxX: Math.max(...xs) + pad, maxY: Math.max(...ys) + pad };
}

function strokeAttrs(el: BoardElement): string {
  const s = el.style;
  const dash = s.stroke_style === 'dashed' ? ` stroke-dasharray="${n(s.stroke_width * 4)} ${n(s.stroke_width * 3)}"` : s.stroke_style === 'dotted' ? ` stroke-dasharray="${n(s.stroke_width)} ${n(s.stroke_width * 2.5)}"` : '';
  return `stroke="${s.stroke === 'transparent' ? 'none' : s.stroke}" stroke-width="${n(s.stroke_width)}" stroke-linecap="round" stroke-linejoin="round"${dash}`;
}

function fillAttr(el: BoardElement, patterns: Set<string>): string {
  const s = el.style;
  if (s.fill === 'transparent') return 'fill="none"';
  if (s.fill_style === 'solid') return `fill="${s.fill}"`;
  const id = `p${s.fill_style === 'hachure' ? 'h' : 'x'}${s.fill.slice(1)}`;
  patterns.add(`${id}|${s.fill}|${s.fill_style}`);
  return `fill="url(#${id})"`;
}

function arrowhead(kind: string, tip: [number, number], from: [number, number], size: number): string {
  if (kind === 'none') return '';
  const ang = Math.atan2(tip[1] - from[1], tip[0] - from[0]);
  const p = (a: number, r: number): string => `${n(tip[0] - r * Math.cos(ang + a))},${n(tip[1] - r * Math.sin(ang + a))}`;
  if (kind === 'dot') return `<circle cx="${n(tip[0])}" cy="${n(tip[1])}" r="${n(size / 3)}"/>`;
  if (kind === 'bar') return `<polyline fill="none" points="${p(Math.PI / 2, size / 2)} ${p(-Math.PI / 2, size / 2)}"/>`;
  if (kind === 'triangle') return `<polygon points="${n(tip[0])},${n(tip[1])} ${p(0.45, size)} ${p(-0.45, size)}"/>`;
  return `<polyline fill="none" points="${p(0.45, size)} ${n(tip[0])},${n(tip[1])} ${p(-0.45, size)}"/>`;
}

/**
 * A path through pen points. Points closer than `tolerance` to the last kept
 * one are dropped: they would not move a pixel of the thumbnail, and long
 * strokes dominate render time. Shrunk pages (tolerance >= 0.5) use straight
 * segments between the kept points, which are under a pixel apart anyway;
 * otherwise quadratic curves through the midpoints smooth the stroke.
 */
function freehandPath(all: number[][], tolerance: number): string {
  const points: number[][] = [all[0]];
  for (let i = 1; i < all.length; i++) {
    const last = points[points.length - 1];
    if (i === all.length - 1 || Math.abs(all[i][0] - last[0]) + Math.abs(all[i][1] - last[1]) >= tolerance) points.push(all[i]);
  }
  if (points.length === 1) return `M${n(points[0][0])} ${n(points[0][1])}l0.1 0`;
  const parts: string[] = [`M${n(points[0][0])} ${n(points[0][1])}`];
  if (tolerance >= 0.5) {
    for (let i = 1; i < points.length; i++) parts.push(`L${n(points[i][0])} ${n(points[i][1])}`);
    return parts.join('');
  }
  for (let i = 1; i < points.length - 1; i++) {
    const [x, y] = points[i];
    const [nx, ny] = points[i + 1];
    parts.push(`Q${n(x)} ${n(y)} ${n((x + nx) / 2)} ${n((y + ny) / 2)}`);
  }
  const last = points[points.length - 1];
  parts.push(`L${n(last[0])} ${n(last[1])}`);
  return parts.join('');
}

function textLines(x: number, lines: string[], size: number): string {
  return lines.map((l, i) => `<tspan x="${n(x)}" dy="${i === 0 ? n(size) : n(size * LINE_HEIGHT)}">${esc(l) || ' '}</tspan>`).join('');
}

function elementSvg(el: BoardElement, patterns: Set<string>, tolerance: number): string {
  const b = localBox(el);
  const rot = el.angle ? ` transform="rotate(${n((el.angle * 180) / Math.PI)} ${n((b.minX + b.maxX) / 2)} ${n((b.minY + b.maxY) / 2)})"` : '';
  const op = el.style.opacity < 100 ? ` opacity="${el.style.opacity / 100}"` : '';
  const g = (inner: string) => `<g${rot}${op}>${inner}</g>`;
  const stroke = strokeAttrs(el);
  switch (el.type) {
    case 'freehand': {
      const pts = el.points.map((p) => [el.x + p[0], el.y + p[1]]);
      return g(`<path d="${freehandPath(pts, tolerance)}" fill="none" ${stroke}/>`);
    }
    case 'rectangle':
      return g(`<rect x="${n(el.x)}" y="${n(el.y)}" width="${n(el.width)}" height="${n(el.height)}" rx="${n(Math.min(el.width, el.height) * 0.08)}" ${fillAttr(el, patterns)} ${stroke}/>`);
    case 'ellipse':
      return g(`<ellipse cx="${n(el.x + el.width / 2)}" cy="${n(el.y + el.height / 2)}" rx="${n(el.width / 2)}" ry="${n(el.height / 2)}" ${fillAttr(el, patterns)} ${stroke}/>`);
    case 'diamond': {
      const { x, y, width: w, height: h } = el;
      return g(`<polygon points="${n(x + w / 2)},${n(y)} ${n(x + w)},${n(y + h / 2)} ${n(x + w / 2)},${n(y + h)} ${n(x)},${n(y + h / 2)}" ${fillAttr(el, patterns)} ${stroke}/>`);
    }
    case 'line':
    case 'arrow': {
      const pts = el.points.map((p) => [el.x + p[0], el.y + p[1]] as [number, number]);
      const size = Math.max(10, el.style.stroke_width * 5);
      const heads =
        arrowhead(el.end_arrowhead, pts[pts.length - 1], pts[pts.length - 2], size) + arrowhead(el.start_arrowhead, pts[0], pts[1], size);
      return g(`<polyline points="${pts.map((p) => `${n(p[0])},${n(p[1])}`).join(' ')}" fill="none" ${stroke}/><g fill="${el.style.stroke}" ${stroke}>${heads}</g>`);
    }
    case 'text': {
      const anchor = el.align === 'center' ? 'middle' : el.align === 'right' ? 'end' : 'start';
      const tx = el.align === 'center' ? el.x + el.width / 2 : el.align === 'right' ? el.x + el.width : el.x;
      return g(`<text x="${n(tx)}" y="${n(el.y)}" font-family="${FONTS[el.font_family]}" font-size="${n(el.font_size)}" text-anchor="${anchor}" fill="${el.style.stroke}">${textLines(tx, el.text.split('\n'), el.font_size)}</text>`);
    }
    case 'formula': {
      const text = latexToText(el.latex);
      return g(`<text x="${n(el.x)}" y="${n(el.y)}" font-family="${FONTS.math}" font-style="italic" font-size="${n(el.font_size)}" fill="${el.style.stroke}">${textLines(el.x, [text], el.font_size)}</text>`);
    }
    case 'vector': {
      const tip: [number, number] = [el.x + el.dx, el.y + el.dy];
      const size = Math.max(10, el.style.stroke_width * 5);
      const label = [el.label, el.magnitude !== null ? `${el.magnitude}${el.unit ? ` ${el.unit}` : ''}` : ''].filter(Boolean).join(' = ');
      const len = Math.hypot(el.dx, el.dy) || 1;
      // the label sits beside the middle of the arrow, on its left-hand side
      const lx = el.x + el.dx / 2 + (el.dy / len) * 14;
      const ly = el.y + el.dy / 2 - (el.dx / len) * 14;
      return g(
        `<line x1="${n(el.x)}" y1="${n(el.y)}" x2="${n(tip[0])}" y2="${n(tip[1])}" ${stroke}/>` +
          `<g fill="${el.style.stroke}" ${stroke}>${arrowhead('triangle', tip, [el.x, el.y], size)}</g>` +
          (label ? `<text x="${n(lx)}" y="${n(ly)}" font-family="${FONTS.math}" font-style="italic" font-size="18" text-anchor="middle" fill="${el.style.stroke}">${esc(label)}</text>` : ''),
      );
    }
  }
}

function patternDefs(patterns: Set<string>): string {
  return [...patterns]
    .map((p) => {
      const [id, color, style] = p.split('|');
      const cross = style === 'cross-hatch' ? `<line x1="0" y1="0" x2="8" y2="8" stroke="${color}" stroke-width="1.2"/>` : '';
      return `<pattern id="${id}" width="8" height="8" patternUnits="userSpaceOnUse"><line x1="0" y1="8" x2="8" y2="0" stroke="${color}" stroke-width="1.2"/>${cross}</pattern>`;
    })
    .join('');
}

/**
 * Renders elements (one page, stacking order) to an SVG that fits them with
 * a margin, at least `minSize` scene units wide and tall so a single dot does
 * not fill the thumbnail.
 */
export function renderPageSvg(
  elements: BoardElement[],
  opts: { minSize?: number; margin?: number; background?: string; outputWidth?: number } = {},
): PageSvg {
  const minSize = opts.minSize ?? 400;
  const margin = opts.margin ?? 24;
  let box: Box = { minX: Infinity, minY: Infinity, maxX: -Infinity, maxY: -Infinity };
  for (const el of elements) {
    const b = rotatedBox(el);
    box = { minX: Math.min(box.minX, b.minX), minY: Math.min(box.minY, b.minY), maxX: Math.max(box.maxX, b.maxX), maxY: Math.max(box.maxY, b.maxY) };
  }
  if (!elements.length) box = { minX: 0, minY: 0, maxX: minSize, maxY: minSize * 0.75 };
  const cx = (box.minX + box.maxX) / 2;
  const cy = (box.minY + box.maxY) / 2;
  let width = Math.max(box.maxX - box.minX, minSize) + margin * 2;
  let height = Math.max(box.maxY - box.minY, minSize * 0.5) + margin * 2;
  // a thumbnail between 2:1 and 2:3, whatever the content's shape
  if (height > width * 1.5) width = height / 1.5;
  if (width > height * 2) height = width / 2;
  const x0 = cx - width / 2;
  const y0 = cy - height / 2;
  // 0.8 of an output pixel, in scene units
  const tolerance = opts.outputWidth ? (0.8 * width) / opts.outputWidth : 0;
  unit = tolerance >= 0.5 ? 1 : 10;
  const patterns = new Set<string>();
  const body = elements.map((el) => elementSvg(el, patterns, tolerance));
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${n(width)}" height="${n(height)}" viewBox="${n(x0)} ${n(y0)} ${n(width)} ${n(height)}">` +
    `<defs>${patternDefs(patterns)}</defs>` +
    `<rect x="${n(x0)}" y="${n(y0)}" width="${n(width)}" height="${n(height)}" fill="${opts.background ?? '#ffffff'}"/>` +
    body.join('') +
    `</svg>`;
  return { svg, width, height };
}
