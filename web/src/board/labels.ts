import { restoreElements } from '@excalidraw/excalidraw';
import type { ExEl } from './convert.js';

/**
 * A shape's label (a text with `containerId`) is stored as typed (docs/snapshot-format.md): the editor
 * it was typed in wrapped it to the shape's width, but another person's editor draws the `text` it is
 * given, and showed a long label as one line cut off at both sides of the shape until the shape was
 * next moved. So every label that arrives, or whose shape arrives (moved or resized by someone else),
 * is wrapped here the way Excalidraw wraps a label in its shape (restoreElements' refreshDimensions:
 * its own wrapText, with the shape's padding), from the text as typed. Only the line breaks change:
 * the position and size are the ones the author's editor stored. A label being typed on this page is
 * left alone. A label wrapped before its font was in memory (a reload, a late join: it is measured in a
 * fallback font) is wrapped again when the browser's fonts finish loading (Board.tsx). What this changes is never sent: BoardSync takes the editor's versions after it applies
 * the board, and a person's later edit of the label sends its text as typed (`originalText`).
 */
export function wrapLabels(elements: readonly ExEl[], arrived: ReadonlySet<string> | null, editing: string | null): readonly ExEl[] {
  // `arrived` null: every label (the fonts loaded)
  const due = (e: ExEl) => e.type === 'text' && !!e.containerId && !e.isDeleted && e.id !== editing && (!arrived || arrived.has(e.id) || arrived.has(e.containerId));
  // this runs on every board update: most carry no label, and then nothing is looked up or copied
  if (!elements.some(due)) return elements;
  const byId = new Map(elements.map((e) => [e.id, e]));
  let changed = false;
  const out = elements.map((e) => {
    if (!due(e)) return e;
    const shape = byId.get(e.containerId!);
    if (!shape || shape.isDeleted) return e;
    const typed = e.originalText || e.text || '';
    const restored = restoreElements([shape, { ...e, text: typed }] as never, null, { repairBindings: true, refreshDimensions: true }) as unknown as ExEl[];
    const wrapped = restored.find((r) => r.id === e.id)?.text;
    if (wrapped === undefined || wrapped === e.text) return e;
    changed = true;
    return { ...e, text: wrapped };
  });
  // the same array when no line break changed: the caller then has nothing to redraw
  return changed ? out : elements;
}
