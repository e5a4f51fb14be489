import { CaptureUpdateAction, getCommonBounds, getVisibleSceneBounds, restoreElements } from '@excalidraw/excalidraw';
import type { ExcalidrawImperativeAPI } from '@excalidraw/excalidraw/types';
import type { ExEl } from './convert.js';
import { wrapLabels } from './labels.js';

/**
 * The scene BoardSync asks for (SyncHost.setScene), in an editor: only new skeletons go through
 * restoreElements; the scene's own objects are passed back as they are (restoring copies them, and
 * a stroke being drawn would lose its object). The participant's board and the replay share it.
 */
export function setScene(api: ExcalidrawImperativeAPI | null, els: readonly (ExEl | Partial<ExEl>)[], fresh: Set<string>): void {
  const restored = new Map(restoreElements(els.filter((e) => fresh.has(e.id!)) as never, null, { refreshDimensions: false, repairBindings: false }).map((e) => [e.id, e]));
  const elements = els.flatMap((e): unknown[] => (fresh.has(e.id!) ? (restored.has(e.id!) ? [restored.get(e.id!)!] : []) : [e])) as unknown as ExEl[];
  const editing = api?.getAppState().editingTextElement?.id ?? null;
  api?.updateScene({ elements: wrapLabels(elements, fresh, editing) as never, captureUpdate: CaptureUpdateAction.NEVER });
}

/**
 * On a page shown anew (the first load, a page switch, a pin), a page none of whose elements is
 * wholly in view (drawn on a bigger screen, or scrolled elsewhere) is centred at the person's own
 * zoom: an empty-looking page is taken for a lost one. A page with something in view stays put.
 */
export function reveal(api: ExcalidrawImperativeAPI | null): void {
  const els = api?.getSceneElements() ?? [];
  if (!api || !els.length) return;
  const [vx1, vy1, vx2, vy2] = getVisibleSceneBounds(api.getAppState() as never);
  const inView = els.some((e) => {
    const [x1, y1, x2, y2] = getCommonBounds([e]);
    return x1 >= vx1 && y1 >= vy1 && x2 <= vx2 && y2 <= vy2;
  });
  if (!inView) api.scrollToContent(els, { animate: false });
}
