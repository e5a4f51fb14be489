import { CaptureUpdateAction, Excalidraw } from '@excalidraw/excalidraw';
import type { ExcalidrawImperativeAPI } from '@excalidraw/excalidraw/types';
import { useEffect, useMemo, useRef, useState } from 'react';
import { boardAt } from '../../../src/board/history.js';
import { ELEMENT_TYPES, OPTIONAL_ELEMENT_FIELDS } from '../../../src/board/schema.js';
import type { ExEl } from '../board/convert.js';
import { Overlays, type Viewport } from '../board/Overlays.js';
import { reveal, setScene } from '../board/scene.js';
import { subjectSetup, type SubjectMode } from '../board/SubjectTools.js';
import { FileTransfer } from '../board/images.js';
import { BoardSync } from '../board/sync.js';
import type { ReplayTimeline } from './player.js';

/**
 * The board of the replay, read-only: Excalidraw in view mode, kept by the participant page's own
 * BoardSync, which is fed the history as a connection would feed it (board.ops going forward, a
 * whole board.state rebuilt from the history when going back), so the replay draws the board as
 * the participants saw it. Nothing is ever sent (there is no connection), and there are no pointers.
 */
export function ReplayBoard(props: { timeline: ReplayTimeline; seq: number; subject: SubjectMode; lessonId: string; token: string }) {
  const apiRef = useRef<ExcalidrawImperativeAPI | null>(null);
  // the board's images, fetched with the replay link (GET /files accepts it, read-only) as the page fetches them
  const transfer = useMemo(
    () => new FileTransfer(props.lessonId, props.token, (files) => apiRef.current?.addFiles(files.map((f) => ({ ...f, created: Date.now() })) as never)),
    [props.lessonId, props.token],
  );
  const current = useRef<{ sync: BoardSync; seq: number } | null>(null);
  const [ready, setReady] = useState(false);
  const [viewport, setViewport] = useState<Viewport>({ scrollX: 0, scrollY: 0, zoom: 1 });
  const [sceneEls, setSceneEls] = useState<readonly ExEl[]>([]);
  const [shown, setShown] = useState({ seq: 0, page: '' });
  const setup = subjectSetup(props.subject);

  const newSync = (page: string) =>
    new BoardSync({
      scene: () => (apiRef.current?.getSceneElementsIncludingDeleted() ?? []) as unknown as readonly ExEl[],
      setScene: (els, fresh) => setScene(apiRef.current, els, fresh),
      clearHistory: () => apiRef.current?.history.clear(),
      reveal: () => reveal(apiRef.current),
      drawing: () => null,
      now: () => performance.now(),
      send: () => false,
      changed: () => undefined,
      notify: () => undefined,
      lastPage: page,
      kept: [],
      roughness: setup.roughness,
      // a teacher's screen: pins never hold the replay on a page, it follows the history
      role: 'teacher',
      maxFrameBytes: Infinity,
    });

  useEffect(() => {
    if (!ready) return;
    const { timeline, seq } = props;
    const page = timeline.pageAt(seq);
    let cur = current.current;
    if (!cur || seq < cur.seq) {
      const at = boardAt(timeline.entries, seq);
      // an empty scene first: a new sync would take what the old one drew for the person's own edits
      apiRef.current?.updateScene({ elements: [], captureUpdate: CaptureUpdateAction.NEVER });
      const sync = newSync(page);
      sync.onState({ type: 'board.state', seq: at.seq, full: true, pages: at.pages, pinned_page_id: at.pinned_page_id, elements: at.elements, deleted_ids: [], optional_fields: [...OPTIONAL_ELEMENT_FIELDS], element_types: [...ELEMENT_TYPES] });
      cur = current.current = { sync, seq };
    } else if (seq > cur.seq) {
      const from = cur.seq;
      cur.sync.onOps({ type: 'board.ops', ops: timeline.entries.slice(from, seq).map((e) => ({ seq: e.seq, op: e.op })) });
      cur.seq = seq;
    }
    cur.sync.goTo(page);
    setShown({ seq, page: cur.sync.view().page });
  }, [ready, props.seq, props.timeline]); // eslint-disable-line react-hooks/exhaustive-deps

  const onChange = (elements: readonly unknown[], appState: { scrollX: number; scrollY: number; zoom: { value: number } }, files: Record<string, unknown>) => {
    if (!ready && apiRef.current) setReady(true);
    const want = (elements as readonly ExEl[]).filter((e) => !e.isDeleted && e.type === 'image' && typeof e.fileId === 'string' && !files[e.fileId]).map((e) => e.fileId as string);
    if (want.length) transfer.want(want);
    setSceneEls(elements as readonly ExEl[]);
    setViewport((v) => (v.scrollX === appState.scrollX && v.scrollY === appState.scrollY && v.zoom === appState.zoom.value ? v : { scrollX: appState.scrollX, scrollY: appState.scrollY, zoom: appState.zoom.value }));
  };
  const live = sceneEls.filter((e) => !e.isDeleted);
  const pageName = current.current?.sync.view().pages.find((p) => p.id === shown.page)?.name ?? '';

  return (
    <div className="board replay-board">
      <div className="replay-pagename" data-testid="replay-page" data-page={shown.page}>
        {pageName}
      </div>
      <div className="board-canvas" data-testid="board" data-loaded={ready ? 'true' : 'false'} data-elements={live.length} data-ids={live.map((e) => e.id).join(' ')} data-seq={shown.seq}>
        <Excalidraw
          excalidrawAPI={(api) => (apiRef.current = api)}
          onChange={onChange as never}
          viewModeEnabled
          gridModeEnabled={setup.grid}
          UIOptions={{ tools: { image: false }, canvasActions: { loadScene: false, saveToActiveFile: false, export: false, saveAsImage: true, clearCanvas: false, toggleTheme: false } }}
          initialData={{ appState: { currentItemRoughness: setup.roughness, currentItemStrokeWidth: 2, gridSize: 20, viewBackgroundColor: '#ffffff' } as never }}
        />
        <Overlays elements={sceneEls} view={viewport} />
      </div>
    </div>
  );
}
