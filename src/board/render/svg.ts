import { edgesOf, type BoardElement } from '../schema.js';
import { RENDER_BUDGET, RenderBudget, type RenderBudgetLimits } from './budget.js';
import { frameOf, intersects, type Box } from './framing.js';
import { latexToText } from './latex.js';
import { typesetMath, vectorLabelLatex } from './math.js';
import { wrapLines } from './wrap.js';

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
  /** a budget simplified or left something out (RENDER_BUDGET) */
  approximate: boolean;
}

// Generic families only: png.ts maps them to the fonts it loaded.
const FONTS: Record<string, string> = { hand: 'sans-serif', sans: 'sans-serif', code: 'monospace', math: 'serif' };
const LINE_HEIGHT = 1.25;
const KATEX_EM = 1.21;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
/**
 * Coordinates are rounded to what the thumbnail can show: whole scene units
 * when the page is shrunk (the usual case; integers also format much faster
 * than floats), tenths otherwise. Set per render (renders are synchronous).
 */
let unit = 10;
const n = (v: number) => String(Math.round(v * unit) / unit);

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

/** What drawing one element needs to know about the whole render. */
interface DrawCtx {
  patterns: Set<string>;
  /** pen points closer than this (scene units) are merged */
  tolerance: number;
  /** output pixels per scene unit */
  scale: number;
  /** every `stride`-th pen or line point is kept (RENDER_BUDGET.points) */
  stride: number;
  budget: RenderBudget;
  /** what the budget allows (RENDER_BUDGET, or the caller's) */
  limits: RenderBudgetLimits;
  /** the farthest a point of the picture is from (x, y), in scene units: text beyond it cannot show */
  reach: (x: number, y: number) => number;
  /** the pictures of the page's image files (data: URLs by file id); an image without one is drawn as a placeholder */
  images?: Map<string, string>;
}

/**
 * What a stroke of `length` scene units costs, in fill pixels: its area, plus
 * RENDER_BUDGET.strokeEdgePx per pixel of length for the anti-aliased edges
 * and joins resvg computes along it (measured: a thin stroke costs resvg about
 * 16 times a fill of the same area).
 */
function strokePaint(el: BoardElement, length: number, ctx: DrawCtx): number {
  if (el.style.stroke === 'transparent') return 0;
  return length * ctx.scale * (Math.max(1, el.style.stroke_width * ctx.scale) + ctx.limits.strokeEdgePx);
}

/**
 * Stroke attributes. A dash pattern finer than RENDER_BUDGET.minDashPx, or one
 * that would cut the stroke into more than dashesPerElement dashes, is drawn
 * solid: it would not show on the thumbnail, and resvg builds every dash.
 */
function strokeAttrs(el: BoardElement, ctx: DrawCtx, length: number): string {
  const s = el.style;
  const [on, off] = s.stroke_style === 'dashed' ? [4, 3] : s.stroke_style === 'dotted' ? [1, 2.5] : [0, 0];
  const onPx = on * s.stroke_width * ctx.scale;
  const dashes = on ? length / ((on + off) * s.stroke_width) : 0;
  const dashed = on > 0 && onPx >= ctx.limits.minDashPx && dashes <= ctx.limits.dashesPerElement;
  if (on > 0 && !dashed) ctx.budget.approximate = true;
  const dash = dashed ? ` stroke-dasharray="${n(s.stroke_width * on)} ${n(s.stroke_width * off)}"` : '';
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

/** Output pixels painted by a shape's fill (patterns cost about twice a plain fill). */
function fillPaint(el: BoardElement, area: number, ctx: DrawCtx): number {
  if (el.style.fill === 'transparent') return 0;
  return area * ctx.scale * ctx.scale * (el.style.fill_style === 'solid' ? 1 : 2);
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

/** Every `stride`-th point, always with the last (RENDER_BUDGET.points). */
function thin<T>(points: T[], stride: number): T[] {
  if (stride <= 1) return points;
  const out: T[] = [];
  for (let i = 0; i < points.length - 1; i += stride) out.push(points[i]);
  out.push(points[points.length - 1]);
  return out;
}

function pathLength(points: number[][]): number {
  let len = 0;
  for (let i = 1; i < points.length; i++) len += Math.hypot(points[i][0] - points[i - 1][0], points[i][1] - points[i - 1][1]);
  return len;
}

/**
 * A diamond with round corners as the editor draws one: each corner cut a quarter of the way along
 * its sides (horizontally a quarter of half the width, vertically of half the height), joined by a
 * curve pulled to the corner.
 */
function roundDiamondPath(x: number, y: number, w: number, h: number): string {
  const v = (w / 2) * 0.25;
  const r = (h / 2) * 0.25;
  const [tx, ty, rx, ry, bx, by, lx, ly] = [x + w / 2, y, x + w, y + h / 2, x + w / 2, y + h, x, y + h / 2];
  const p = (px: number, py: number) => `${n(px)} ${n(py)}`;
  const corner = (cx: number, cy: number, ex: number, ey: number) => `C${p(cx, cy)} ${p(cx, cy)} ${p(ex, ey)}`;
  return (
    `M${p(tx + v, ty + r)}L${p(rx - v, ry - r)}${corner(rx, ry, rx - v, ry + r)}` +
    `L${p(bx + v, by - r)}${corner(bx, by, bx - v, by - r)}` +
    `L${p(lx + v, ly + r)}${corner(lx, ly, lx + v, ly - r)}` +
    `L${p(tx - v, ty + r)}${corner(tx, ty, tx + v, ty + r)}Z`
  );
}

/** A smooth curve through every point (Catmull-Rom as cubic Béziers), as the editor draws a round line. */
function curvePath(p: [number, number][]): string {
  const parts = [`M${n(p[0][0])} ${n(p[0][1])}`];
  for (let i = 0; i < p.length - 1; i++) {
    const [p0, p1, p2, p3] = [p[i - 1] ?? p[i], p[i], p[i + 1], p[i + 2] ?? p[i + 1]];
    parts.push(
      `C${n(p1[0] + (p2[0] - p0[0]) / 6)} ${n(p1[1] + (p2[1] - p0[1]) / 6)} ${n(p2[0] - (p3[0] - p1[0]) / 6)} ${n(p2[1] - (p3[1] - p1[1]) / 6)} ${n(p2[0])} ${n(p2[1])}`,
    );
  }
  return parts.join('');
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

/** Drops a high surrogate left alone at the end by a cut. */
function cut(s: string, chars: number): string {
  if (s.length <= chars) return s;
  const c = s.charCodeAt(chars - 1);
  return s.slice(0, c >= 0xd800 && c <= 0xdbff ? chars - 1 : chars);
}

/**
 * The lines of a text that can show inside the picture: a line further than
 * the picture reaches from the text's origin, or a character past that
 * distance (no glyph is narrower than 0.2 em), cannot be seen whatever the
 * rotation, so it is not handed to resvg.
 */
function visibleLines(text: string, x: number, y: number, size: number, ctx: DrawCtx): string[] {
  const reach = ctx.reach(x, y) / size;
  const maxLines = Math.ceil(reach / LINE_HEIGHT) + 1;
  const maxChars = Math.ceil(reach / 0.2) + 1;
  const lines = text.split('\n', maxLines);
  if (lines.length === maxLines && text.split('\n', maxLines + 1).length > maxLines) ctx.budget.approximate = true;
  return lines.map((l) => {
    if (l.length > maxChars) ctx.budget.approximate = true;
    return cut(l, maxChars);
  });
}

/**
 * Text as glyphs while the glyph budget lasts and the glyphs are big enough
 * to read; otherwise one bar per line, a third as thick as the font and about
 * as long as the text (0.5 em a character). Null when even that does not fit.
 */
function textSvg(lines: string[], x: number, y: number, size: number, anchor: string, family: string, italic: boolean, color: string, ctx: DrawCtx): string | null {
  const chars = lines.reduce((a, l) => a + l.length, 0);
  const sizePx = size * ctx.scale;
  const glyphs = sizePx >= ctx.limits.minGlyphPx && ctx.budget.takeGlyphs(chars + ctx.limits.glyphsPerTextElement);
  if (glyphs) {
    if (!ctx.budget.takePaint(chars * sizePx * sizePx * 0.6)) return null;
    const style = italic ? ' font-style="italic"' : '';
    return `<text x="${n(x)}" y="${n(y)}" font-family="${family}"${style} font-size="${n(size)}" text-anchor="${anchor}" fill="${color}">${textLines(x, lines, size)}</text>`;
  }
  if (sizePx >= ctx.limits.minGlyphPx) ctx.budget.approximate = true;
  const bars: string[] = [];
  let paint = 0;
  lines.forEach((l, i) => {
    const len = l.trim().length * size * 0.5;
    if (!len) return;
    const x0 = anchor === 'middle' ? x - len / 2 : anchor === 'end' ? x - len : x;
    bars.push(`M${n(x0)} ${n(y + size * 0.65 + i * size * LINE_HEIGHT)}h${n(len)}`);
    paint += len * ctx.scale * Math.max(1, (size / 3) * ctx.scale);
  });
  if (!bars.length) return '';
  if (!ctx.budget.takePoints(bars.length * 2) || !ctx.budget.takePaint(paint)) return null;
  return `<path d="${bars.join('')}" stroke="${color}" stroke-opacity="0.35" stroke-width="${n(size / 3)}" fill="none"/>`;
}

function textLines(x: number, lines: string[], size: number): string {
  return lines.map((l, i) => `<tspan x="${n(x)}" dy="${i === 0 ? n(size) : n(size * LINE_HEIGHT)}">${esc(l) || ' '}</tspan>`).join('');
}

/**
 * A formula typeset (render/math.ts) and centred on (cx, cy) at `size` scene units an em; null when
 * the budget has no room for it, undefined when it cannot be typeset or is too small to read (the
 * caller then draws the plain-text approximation, greeked if need be). Its glyph paths cost points
 * (a point about every 12 characters of path data) and its box paint.
 */
function mathSvg(latex: string, cx: number, cy: number, size: number, color: string, ctx: DrawCtx): string | null | undefined {
  if (size * ctx.scale < ctx.limits.minGlyphPx) return undefined;
  const m = typesetMath(latex);
  if (!m) return undefined;
  // KaTeX, which the page typesets with, sets its formulas at 1.21 em (its stylesheet's .katex)
  const em = size * KATEX_EM;
  const [w, h] = [m.widthEm * em, m.heightEm * em];
  if (!ctx.budget.takeGlyphs(latex.length + ctx.limits.glyphsPerTextElement) || !ctx.budget.takePoints(Math.ceil(m.pathChars / 12)) || !ctx.budget.takePaint(w * h * ctx.scale * ctx.scale)) return null;
  const body = m.body.replace(/currentColor/g, color);
  return `<svg x="${n(cx - w / 2)}" y="${n(cy - h / 2)}" width="${n(w)}" height="${n(h)}" viewBox="${m.viewBox.join(' ')}" overflow="visible">${body}</svg>`;
}

/** One element as SVG, or null when the render's budget has no room for it. */
function elementSvg(el: BoardElement, ctx: DrawCtx): string | null {
  const b = localBox(el);
  const rot = el.angle ? ` transform="rotate(${n((el.angle * 180) / Math.PI)} ${n((b.minX + b.maxX) / 2)} ${n((b.minY + b.maxY) / 2)})"` : '';
  // fill- and stroke-opacity rather than group opacity: group opacity makes
  // resvg paint the group on a layer of its own, one per element
  const op = el.style.opacity < 100 ? ` fill-opacity="${el.style.opacity / 100}" stroke-opacity="${el.style.opacity / 100}"` : '';
  const g = (inner: string | null) => (inner === null ? null : `<g${rot}${op}>${inner}</g>`);
  switch (el.type) {
    case 'freehand':
    case 'line':
    case 'arrow': {
      const pts = thin(el.points, ctx.stride).map((p) => [el.x + p[0], el.y + p[1]] as [number, number]);
      if (pts.length < el.points.length) ctx.budget.approximate = true;
      const length = pathLength(pts);
      // a point of a round line is a cubic segment for resvg to flatten: it costs two (measured:
      // 300 lines of 500 points drawn 1.4-1.8 times as slowly round as sharp)
      const round = el.type !== 'freehand' && edgesOf(el) === 'round';
      const cost = round ? 2 : 1;
      if (!ctx.budget.takePoints(pts.length * cost) || !ctx.budget.takePaint(strokePaint(el, length, ctx))) return null;
      const stroke = strokeAttrs(el, ctx, length);
      if (el.type === 'freehand') return g(`<path d="${freehandPath(pts, ctx.tolerance)}" fill="none" ${stroke}/>`);
      if (pts.length < 2) pts.push(pts[0]);
      const size = Math.max(10, el.style.stroke_width * 5);
      // round edges: a smooth curve through the points; it leaves its first point towards the second
      // and reaches its last from the one before, so the heads point as on a sharp line
      const k = pts.length - 1;
      const heads = arrowhead(el.end_arrowhead, pts[k], pts[k - 1], size) + arrowhead(el.start_arrowhead, pts[0], pts[1], size);
      const line =
        round && pts.length > 2
          ? `<path d="${curvePath(pts)}" fill="none" ${stroke}/>`
          : `<polyline points="${pts.map((p) => `${n(p[0])},${n(p[1])}`).join(' ')}" fill="none" ${stroke}/>`;
      return g(`${line}<g fill="${el.style.stroke}" ${stroke}>${heads}</g>`);
    }
    case 'rectangle':
    case 'ellipse':
    case 'diamond': {
      const { x, y, width: w, height: h } = el;
      const perimeter = 2 * (w + h);
      if (!ctx.budget.takePaint(fillPaint(el, w * h, ctx) + strokePaint(el, perimeter, ctx))) return null;
      const fill = fillAttr(el, ctx.patterns);
      const stroke = strokeAttrs(el, ctx, perimeter);
      const round = edgesOf(el) === 'round';
      if (el.type === 'rectangle') {
        // the editor's adaptive radius: a quarter of the shorter side, at most 32
        const rx = round ? ` rx="${n(Math.min(Math.min(w, h) * 0.25, 32))}"` : '';
        return g(`<rect x="${n(x)}" y="${n(y)}" width="${n(w)}" height="${n(h)}"${rx} ${fill} ${stroke}/>`);
      }
      if (el.type === 'ellipse') return g(`<ellipse cx="${n(x + w / 2)}" cy="${n(y + h / 2)}" rx="${n(w / 2)}" ry="${n(h / 2)}" ${fill} ${stroke}/>`);
      if (!round) return g(`<polygon points="${n(x + w / 2)},${n(y)} ${n(x + w)},${n(y + h / 2)} ${n(x + w / 2)},${n(y + h)} ${n(x)},${n(y + h / 2)}" ${fill} ${stroke}/>`);
      return g(`<path d="${roundDiamondPath(x, y, w, h)}" ${fill} ${stroke}/>`);
    }
    case 'text': {
      const anchor = el.align === 'center' ? 'middle' : el.align === 'right' ? 'end' : 'start';
      const tx = el.align === 'center' ? el.x + el.width / 2 : el.align === 'right' ? el.x + el.width : el.x;
      if (!el.container_id) return g(textSvg(visibleLines(el.text, tx, el.y, el.font_size, ctx), tx, el.y, el.font_size, anchor, FONTS[el.font_family], false, el.style.stroke, ctx));
      // a shape's label: wrapped to its box (render/wrap.ts), in the middle of it as the editor places it
      const wrapped = wrapLines(el.text, el.width, el.font_size, Math.ceil(ctx.reach(tx, el.y) / el.font_size / LINE_HEIGHT) + 2);
      const ty = el.y + (el.height - wrapped.length * el.font_size * LINE_HEIGHT) / 2;
      const lines = visibleLines(wrapped.join('\n'), tx, ty, el.font_size, ctx);
      return g(textSvg(lines, tx, ty, el.font_size, anchor, FONTS[el.font_family], false, el.style.stroke, ctx));
    }
    case 'formula': {
      // as the page shows it: a white card (it hides what lies under it) with the formula typeset in its middle
      const card = el.style.opacity < 100 ? '' : `<rect x="${n(el.x)}" y="${n(el.y)}" width="${n(el.width)}" height="${n(el.height)}" fill="#ffffff"/>`;
      const math = mathSvg(el.latex, el.x + el.width / 2, el.y + el.height / 2, el.font_size, el.style.stroke, ctx);
      if (math !== undefined) return math === null ? null : g(card + math);
      const lines = visibleLines(latexToText(el.latex), el.x, el.y, el.font_size, ctx).slice(0, 1);
      return g(textSvg(lines, el.x, el.y, el.font_size, 'start', FONTS.math, true, el.style.stroke, ctx));
    }
    case 'image': {
      // the file's picture comes with the files the renderer is given; without it, the placeholder the page shows
      const { x, y, width: w, height: h } = el;
      if (!ctx.budget.takePaint(fillPaint(el, w * h, ctx))) return null;
      const href = ctx.images?.get(el.file_id);
      if (href) {
        const [cx, cy] = [x + w / 2, y + h / 2];
        const flip = el.scale[0] === -1 || el.scale[1] === -1 ? ` transform="translate(${n(cx)} ${n(cy)}) scale(${el.scale[0]} ${el.scale[1]}) translate(${n(-cx)} ${n(-cy)})"` : '';
        if (!el.crop) return g(`<image x="${n(x)}" y="${n(y)}" width="${n(w)}" height="${n(h)}" preserveAspectRatio="none" href="${href}"${flip}/>`);
        // the part shown: the whole image in its natural size, seen through a viewBox of the crop
        const c = el.crop;
        return g(
          `<g${flip}><svg x="${n(x)}" y="${n(y)}" width="${n(w)}" height="${n(h)}" viewBox="${n(c.x)} ${n(c.y)} ${n(c.width || 1)} ${n(c.height || 1)}" preserveAspectRatio="none">` +
            `<image width="${n(c.natural_width)}" height="${n(c.natural_height)}" preserveAspectRatio="none" href="${href}"/></svg></g>`,
        );
      }
      return g(`<rect x="${n(x)}" y="${n(y)}" width="${n(w)}" height="${n(h)}" fill="#e9ecef" stroke="#adb5bd" stroke-width="1"/>`);
    }
    case 'vector': {
      const tip: [number, number] = [el.x + el.dx, el.y + el.dy];
      const size = Math.max(10, el.style.stroke_width * 5);
      const length = Math.hypot(el.dx, el.dy);
      if (!ctx.budget.takePaint(strokePaint(el, length + size * 2, ctx))) return null;
      const stroke = strokeAttrs(el, ctx, length);
      const len = length || 1;
      // the label sits beside the middle of the arrow, on its left-hand side, typeset as the page typesets it
      const lx = el.x + el.dx / 2 + (el.dy / len) * 18;
      const ly = el.y + el.dy / 2 - (el.dx / len) * 18;
      let text = mathSvg(vectorLabelLatex(el.label, el.magnitude, el.unit), lx, ly, 18, el.style.stroke, ctx);
      if (text === undefined) {
        const label = [el.label, el.magnitude !== null ? `${el.magnitude}${el.unit ? ` ${el.unit}` : ''}` : ''].filter(Boolean).join(' = ');
        text = label ? textSvg([label], lx, ly - 9, 18, 'middle', FONTS.math, true, el.style.stroke, ctx) : '';
      }
      return g(
        `<line x1="${n(el.x)}" y1="${n(el.y)}" x2="${n(tip[0])}" y2="${n(tip[1])}" ${stroke}/>` +
          `<g fill="${el.style.stroke}" ${stroke}>${arrowhead('triangle', tip, [el.x, el.y], size)}</g>` +
          (text ?? ''),
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
 * Renders elements (one page, stacking order) to an SVG that frames the
 * content a person would look at (render/framing.ts) with a margin, at least
 * `minSize` scene units wide and tall so a single dot does not fill the
 * thumbnail; an element wholly outside the frame is not drawn. What it draws
 * stays within `budget` (RENDER_BUDGET, budget.ts, unless the caller gives
 * another): elements are admitted from the top of the stack down, so what a
 * budget leaves out is what lies underneath.
 */
export function renderPageSvg(
  elements: BoardElement[],
  opts: { minSize?: number; margin?: number; background?: string; outputWidth?: number; images?: Map<string, string>; budget?: RenderBudgetLimits; tolerance?: number } = {},
): PageSvg {
  const minSize = opts.minSize ?? 400;
  const margin = opts.margin ?? 24;
  const limits = opts.budget ?? RENDER_BUDGET;
  const boxes = elements.map(rotatedBox);
  const box: Box = frameOf(elements.map((el, i) => ({ box: boxes[i], anchor: el.type === 'text' || el.type === 'formula' || el.type === 'image' }))) ?? { minX: 0, minY: 0, maxX: minSize, maxY: minSize * 0.75 };
  const cx = (box.minX + box.maxX) / 2;
  const cy = (box.minY + box.maxY) / 2;
  let width = Math.max(box.maxX - box.minX, minSize) + margin * 2;
  let height = Math.max(box.maxY - box.minY, minSize * 0.5) + margin * 2;
  // a thumbnail between 2:1 and 2:3, whatever the content's shape
  if (height > width * 1.5) width = height / 1.5;
  if (width > height * 2) height = width / 2;
  const x0 = cx - width / 2;
  const y0 = cy - height / 2;
  const view: Box = { minX: x0, minY: y0, maxX: x0 + width, maxY: y0 + height };
  // 0.8 of an output pixel, in scene units (or the caller's: the PDF's, which has no pixels)
  const tolerance = opts.tolerance ?? (opts.outputWidth ? (0.8 * width) / opts.outputWidth : 0);
  unit = tolerance >= 0.5 ? 1 : 10;
  const scale = opts.outputWidth ? opts.outputWidth / width : 1;
  const budget = new RenderBudget(width * scale * height * scale, limits);
  let points = 0;
  for (const el of elements) if ('points' in el) points += el.points.length;
  const corners = [[x0, y0], [x0 + width, y0], [x0, y0 + height], [x0 + width, y0 + height]];
  const ctx: DrawCtx = {
    patterns: new Set<string>(),
    tolerance,
    scale,
    // pen and line points get at most 80 % of the point budget; the rest is for greeked text
    stride: Math.max(1, Math.ceil(points / (limits.points * 0.8))),
    budget,
    limits,
    reach: (x, y) => Math.max(...corners.map(([px, py]) => Math.hypot(px - x, py - y))),
    images: opts.images,
  };
  const body: string[] = [];
  let shown = 0;
  for (let i = elements.length - 1; i >= 0 && body.length < limits.elements; i--) {
    if (!intersects(boxes[i], view)) continue;
    shown++;
    const svg = elementSvg(elements[i], ctx);
    if (svg !== null) body.push(svg);
  }
  if (body.length < shown) budget.approximate = true;
  body.reverse();
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${n(width)}" height="${n(height)}" viewBox="${n(x0)} ${n(y0)} ${n(width)} ${n(height)}">` +
    `<defs>${patternDefs(ctx.patterns)}</defs>` +
    `<rect x="${n(x0)}" y="${n(y0)}" width="${n(width)}" height="${n(height)}" fill="${opts.background ?? '#ffffff'}"/>` +
    body.join('') +
    `</svg>`;
  return { svg, width, height, approximate: budget.approximate };
}
