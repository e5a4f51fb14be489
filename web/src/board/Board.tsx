import { CaptureUpdateAction, Excalidraw, restoreElements } from '@excalidraw/excalidraw';
import type { ExcalidrawImperativeAPI } from '@excalidraw/excalidraw/types';
import { useEffect, useMemo, useRef, useState } from 'react';
import type { BoardOp } from '../../../src/board/schema.js';
import type { ServerMessage } from '../../../src/board/protocol.js';
import type { ExEl } from './convert.js';
import { Overlays, type Viewport } from './Overlays.js';
import { BoardMenu } from '../ui/BoardMenu.js';
import { PageBar } from './PageBar.js';
import { BoardSync, type SyncView } from './sync.js';
import { SubjectTools, subjectSetup, type SubjectMode } from './SubjectTools.js';

export interface BoardHandle {
  message(msg: ServerMessage): void;
  connected(): void;
  disconnected(): void;
}

/**
 * The whiteboard: Excalidraw (pen, shapes, lines/arrows, text, eraser,
 * selection, undo/redo, colours, zoom/pan) plus our pages, subject tools and
 * overlays, kept in step with the server by BoardSync.
 */
export function Board(props: {
  role: 'teacher' | 'student';
  subject: SubjectMode;
  /** the gateway's frame limit (welcome.limits.max_payload_bytes): operations are cut to fit */
  maxFrameBytes: number;
  send: (msg: object) => boolean;
  notify: (text: string) => void;
  onReady: (handle: BoardHandle) => void;
}) {
  const apiRef = useRef<ExcalidrawImperativeAPI | null>(null);
  const [view, setView] = useState<SyncView | null>(null);
  const [viewport, setViewport] = useState<Viewport>({ scrollX: 0, scrollY: 0, zoom: 1 });
  const [sceneEls, setSceneEls] = useState<readonly ExEl[]>([]);
  const setup = subjectSetup(props.subject);
  const throttle = useRef<ReturnType<typeof setTimeout> | null>(null);

  const sync = useMemo(
    () =>
      new BoardSync({
        scene: () => (apiRef.current?.getSceneElementsIncludingDeleted() ?? []) as unknown as readonly ExEl[],
        setScene: (els) => {
          const restored = restoreElements(els as never, null, { refreshDimensions: false, repairBindings: false });
          apiRef.current?.updateScene({ elements: restored, captureUpdate: CaptureUpdateAction.NEVER });
        },
        send: (m) => props.send(m),
        changed: (v) => setView({ ...v }),
        notify: props.notify,
        roughness: setup.roughness,
        role: props.role,
        maxFrameBytes: props.maxFrameBytes,
      }),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [],
  );

  useEffect(() => {
    props.onReady({
      message: (msg) => {
        if (msg.type === 'board.state') sync.onState(msg);
        else if (msg.type === 'board.ops') sync.onOps(msg);
        else if (msg.type === 'board.ack') sync.onAck(msg.ref, msg.seq);
        else if (msg.type === 'board.reject') sync.onReject(msg.ref, msg.message);
        else if (msg.type === 'board.resync') sync.onResync();
      },
      connected: () => sync.connected(),
      disconnected: () => sync.disconnected(),
    });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [sync]);

  const onChange = (elements: readonly unknown[], appState: { scrollX: number; scrollY: number; zoom: { value: number } }) => {
    setSceneEls(elements as readonly ExEl[]);
    setViewport((v) => (v.scrollX === appState.scrollX && v.scrollY === appState.scrollY && v.zoom === appState.zoom.value ? v : { scrollX: appState.scrollX, scrollY: appState.scrollY, zoom: appState.zoom.value }));
    // Batch a burst of changes (a stroke being drawn) into one send every 60 ms.
    if (!throttle.current) {
      throttle.current = setTimeout(() => {
        throttle.current = null;
        sync.flushLocal();
      }, 60);
    }
  };

  const submit = (op: BoardOp) => sync.submit(op);
  const pinnedForMe = !!view?.pinned && props.role === 'student';

  return (
    <div className="board">
      {view && (
        <PageBar
          view={view}
          role={props.role}
          locked={pinnedForMe}
          goTo={(id) => sync.goTo(id)}
          submit={submit}
        />
      )}
      <div className="board-canvas" data-testid="board" data-elements={sceneEls.filter((e) => !e.isDeleted).length} data-seq={view?.seq ?? 0}>
        <Excalidraw
          excalidrawAPI={(api) => (apiRef.current = api)}
          onChange={onChange as never}
          isCollaborating
          gridModeEnabled={setup.grid}
          UIOptions={{ tools: { image: false }, canvasActions: { loadScene: false, saveToActiveFile: false, export: false, saveAsImage: true, clearCanvas: props.role === 'teacher', toggleTheme: true } }}
          initialData={{ appState: { currentItemRoughness: setup.roughness, currentItemStrokeWidth: 2, gridSize: 20, viewBackgroundColor: '#ffffff' } as never }}
          renderTopRightUI={(isMobile) => <SubjectTools subject={props.subject} api={apiRef} compact={isMobile} />}
        >
          <BoardMenu />
        </Excalidraw>
        <Overlays elements={sceneEls} view={viewport} />
      </div>
    </div>
  );
}
