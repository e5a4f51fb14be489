import { CaptureUpdateAction, getCommonBounds, getVisibleSceneBounds, restoreElements } from '@excalidraw/excalidraw';
import type { ExcalidrawImperativeAPI } from '@excalidraw/excalidraw/types';
import katex from 'katex';
import { useState, type ReactNode, type RefObject } from 'react';
import type { SubjectMode } from '../../../src/domain/enums.js';
import { freeSpot, type Box } from './placement.js';

export type { SubjectMode };

/**
 * What each subject_mode adds to the plain Excalidraw toolset (docs/board.md, "Subject modes"):
 * - generic: the plain set, hand-drawn look.
 * - math: square grid (20 px), straight-edged shapes (no roughness), LaTeX formulas.
 * - physics: grid, straight shapes, labelled vectors with magnitude and unit, formulas, a unit palette.
 */
export function subjectSetup(mode: SubjectMode): { grid: boolean; roughness: number; formulas: boolean; vectors: boolean } {
  if (mode === 'math') return { grid: true, roughness: 0, formulas: true, vectors: false };
  if (mode === 'physics') return { grid: true, roughness: 0, formulas: true, vectors: true };
  return { grid: false, roughness: 1, formulas: false, vectors: false };
}

const UNITS = ['N', 'm', 'm/s', 'm/s^2', 'kg', 's', 'J', 'W', 'Pa', 'V', 'A', '\\Omega', 'T', 'Hz', '^\\circ C'];
const SNIPPETS = ['\\frac{a}{b}', 'x^{2}', '\\sqrt{x}', '\\sum_{i=1}^{n}', '\\int_a^b f(x)\\,dx', '\\lim_{x\\to 0}', '\\pi', '\\alpha', '\\Delta', '\\le', '\\ne', '\\infty'];

type Dialog = null | { kind: 'formula'; latex: string } | { kind: 'vector'; label: string; magnitude: string; unit: string };

/**
 * Screen pixels of the view that Excalidraw's toolbars (and, on a phone, our
 * tool column) cover: a card placed there would be hidden under them.
 */
const COVERED = { desktop: { top: 72, bottom: 64, left: 16, right: 16 }, compact: { top: 72, bottom: 96, left: 60, right: 60 } };

/** The part of the view (scene coordinates) not under a toolbar. */
function usableView(api: ExcalidrawImperativeAPI, compact: boolean): Box {
  const s = api.getAppState();
  const c = COVERED[compact ? 'compact' : 'desktop'];
  const z = s.zoom.value;
  const [x1, y1, x2, y2] = getVisibleSceneBounds(s as never);
  return { x: x1 + c.left / z, y: y1 + c.top / z, width: x2 - x1 - (c.left + c.right) / z, height: y2 - y1 - (c.top + c.bottom) / z };
}

/**
 * Top-left corner for a new card of `size`: the free spot nearest the middle
 * of the view, so it covers nothing on the board (placement.ts).
 */
function place(api: ExcalidrawImperativeAPI, size: { width: number; height: number }, compact: boolean): { x: number; y: number } {
  const taken: Box[] = api.getSceneElements().map((e) => {
    const [bx1, by1, bx2, by2] = getCommonBounds([e]);
    return { x: bx1, y: by1, width: bx2 - bx1, height: by2 - by1 };
  });
  return freeSpot(size, usableView(api, compact), taken);
}

/** The size KaTeX gives a formula at `fontSize`, measured off-screen. */
function measure(latex: string, fontSize: number): { width: number; height: number } {
  const probe = document.createElement('div');
  probe.style.cssText = `position:absolute;visibility:hidden;left:-9999px;top:0;font-size:${fontSize}px;white-space:nowrap`;
  probe.innerHTML = katex.renderToString(latex, { throwOnError: false });
  document.body.appendChild(probe);
  const r = probe.getBoundingClientRect();
  probe.remove();
  return { width: Math.ceil(r.width) + 8, height: Math.ceil(r.height) + 6 };
}

function insert(api: ExcalidrawImperativeAPI, el: Record<string, unknown>, compact: boolean): void {
  const [restored] = restoreElements([el as never], null);
  api.updateScene({ elements: [...api.getSceneElementsIncludingDeleted(), restored], captureUpdate: CaptureUpdateAction.IMMEDIATELY });
  // the view had no room: it went below everything, so bring it into view
  const v = usableView(api, compact);
  if (restored.x < v.x || restored.y < v.y || restored.x + restored.width > v.x + v.width || restored.y + restored.height > v.y + v.height) api.scrollToContent(restored, { animate: false });
}

/** `compact`: Excalidraw's phone layout (icons only, in a column of their own: styles.css). */
export function SubjectTools({ subject, api, compact = false, children }: { subject: SubjectMode; api: RefObject<ExcalidrawImperativeAPI | null>; compact?: boolean; children?: ReactNode }) {
  const setup = subjectSetup(subject);
  const [dialog, setDialog] = useState<Dialog>(null);
  // the tools every board has (images) sit in the same bar or column
  const a = api.current;
  const id = () => `el${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;

  const addFormula = (latex: string) => {
    if (!a || !latex.trim()) return;
    const size = measure(latex, 28);
    const at = place(a, size, compact);
    insert(a, { id: id(), type: 'rectangle', ...at, ...size, strokeColor: 'transparent', backgroundColor: '#ffffff', fillStyle: 'solid', roughness: 0, customData: { kind: 'formula', latex, fontSize: 28, color: '#1e1e1e' } }, compact);
  };
  const addVector = (label: string, magnitude: string, unit: string) => {
    if (!a) return;
    // the arrow and its label above it (Overlays.tsx) take about 160 x 40
    const at = place(a, { width: 160, height: 40 }, compact);
    const m = magnitude.trim() === '' ? null : Number(magnitude);
    insert(a, {
      id: id(), type: 'arrow', x: at.x, y: at.y + 30, width: 160, height: 0, points: [[0, 0], [160, 0]], strokeColor: '#1971c2', strokeWidth: 2, roughness: 0,
      startArrowhead: null, endArrowhead: 'triangle',
      customData: { kind: 'vector', label: label.trim().slice(0, 60) || 'F', magnitude: Number.isFinite(m) ? m : null, unit: unit.trim().slice(0, 20) },
    }, compact);
  };

  return (
    <div className={`subject-tools${compact ? ' compact' : ''}`}>
      {children}
      {setup.formulas && (
        <button className="tool-button" title="Insert a formula (LaTeX)" aria-label="Formula" onClick={() => setDialog({ kind: 'formula', latex: '' })} data-testid="tool-formula">
          {compact ? '∑' : '∑ Formula'}
        </button>
      )}
      {setup.vectors && (
        <button className="tool-button" title="Insert a vector with a label" aria-label="Vector" onClick={() => setDialog({ kind: 'vector', label: 'F', magnitude: '', unit: 'N' })} data-testid="tool-vector">
          {compact ? '→' : '→ Vector'}
        </button>
      )}
      {dialog?.kind === 'formula' && (
        <div className="tool-dialog" role="dialog" aria-label="Formula">
          <label>
            LaTeX
            <textarea autoFocus rows={3} value={dialog.latex} onChange={(e) => setDialog({ ...dialog, latex: e.target.value })} placeholder="e.g. x = \frac{-b \pm \sqrt{b^2-4ac}}{2a}" />
          </label>
          <div className="snippets">
            {(subject === 'physics' ? [...SNIPPETS.slice(0, 6), ...UNITS.map((u) => `\\,\\mathrm{${u}}`)] : SNIPPETS).map((s) => (
              <button key={s} onClick={() => setDialog({ ...dialog, latex: dialog.latex + s })} dangerouslySetInnerHTML={{ __html: katex.renderToString(s, { throwOnError: false }) }} />
            ))}
          </div>
          <div className="preview" dangerouslySetInnerHTML={{ __html: katex.renderToString(dialog.latex || '\\,', { throwOnError: false, displayMode: true }) }} />
          <div className="actions">
            <button onClick={() => setDialog(null)}>Cancel</button>
            <button className="primary" onClick={() => { addFormula(dialog.latex); setDialog(null); }}>Insert</button>
          </div>
        </div>
      )}
      {dialog?.kind === 'vector' && (
        <div className="tool-dialog" role="dialog" aria-label="Vector">
          <label>
            Label <input autoFocus value={dialog.label} maxLength={60} onChange={(e) => setDialog({ ...dialog, label: e.target.value })} />
          </label>
          <label>
            Magnitude <input value={dialog.magnitude} inputMode="decimal" onChange={(e) => setDialog({ ...dialog, magnitude: e.target.value })} />
          </label>
          <label>
            Unit
            <select value={dialog.unit} onChange={(e) => setDialog({ ...dialog, unit: e.target.value })}>
              {['', ...UNITS].map((u) => (
                <option key={u} value={u}>{u || '(none)'}</option>
              ))}
            </select>
          </label>
          <div className="actions">
            <button onClick={() => setDialog(null)}>Cancel</button>
            <button className="primary" onClick={() => { addVector(dialog.label, dialog.magnitude, dialog.unit); setDialog(null); }}>Insert</button>
          </div>
        </div>
      )}
    </div>
  );
}
