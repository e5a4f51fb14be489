import katex from 'katex';
import { useMemo } from 'react';
import type { ExEl, FormulaData, VectorData } from './convert.js';

export interface Viewport {
  scrollX: number;
  scrollY: number;
  zoom: number;
}

/**
 * Formulas (KaTeX) and physics vector labels, drawn over the canvas at their
 * elements' positions. The elements themselves are ordinary Excalidraw
 * rectangles/arrows, so selecting, moving, resizing, undo and deleting work
 * as for any shape; this layer only paints what Excalidraw cannot. It lets
 * pointer events through.
 */
export function Overlays({ elements, view }: { elements: readonly ExEl[]; view: Viewport }) {
  const items = elements.filter((e) => !e.isDeleted && (e.customData as { kind?: string } | undefined)?.kind);
  return (
    <div className="overlays" aria-hidden>
      {items.map((e) => {
        const data = e.customData as FormulaData | VectorData;
        return data.kind === 'formula' ? <Formula key={e.id} el={e} data={data} view={view} /> : <VectorLabel key={e.id} el={e} data={data} view={view} />;
      })}
    </div>
  );
}

const at = (x: number, y: number, v: Viewport) => ({ left: (x + v.scrollX) * v.zoom, top: (y + v.scrollY) * v.zoom });

function Formula({ el, data, view }: { el: ExEl; data: FormulaData; view: Viewport }) {
  const html = useMemo(() => katex.renderToString(data.latex, { throwOnError: false, displayMode: false, output: 'html' }), [data.latex]);
  const pos = at(el.x, el.y, view);
  return (
    <div
      className="overlay-formula"
      style={{
        ...pos,
        width: el.width * view.zoom,
        height: el.height * view.zoom,
        fontSize: data.fontSize * view.zoom,
        color: (el.customData as { color?: string }).color ?? '#1e1e1e',
        opacity: (el.opacity ?? 100) / 100,
        transform: el.angle ? `rotate(${el.angle}rad)` : undefined,
      }}
      dangerouslySetInnerHTML={{ __html: html }}
    />
  );
}

function VectorLabel({ el, data, view }: { el: ExEl; data: VectorData; view: Viewport }) {
  const last = el.points?.[el.points.length - 1] ?? [0, 0];
  const len = Math.hypot(last[0], last[1]) || 1;
  // beside the middle of the arrow, on its left-hand side
  const pos = at(el.x + last[0] / 2 + (last[1] / len) * 18, el.y + last[1] / 2 - (last[0] / len) * 18, view);
  const tex = `\\vec{${data.label || 'v'}}${data.magnitude !== null && data.magnitude !== undefined ? ` = ${data.magnitude}\\,\\mathrm{${data.unit || ''}}` : ''}`;
  const html = useMemo(() => katex.renderToString(tex, { throwOnError: false, output: 'html' }), [tex]);
  return <div className="overlay-vector" style={{ ...pos, fontSize: 18 * view.zoom, color: el.strokeColor }} dangerouslySetInnerHTML={{ __html: html }} />;
}
