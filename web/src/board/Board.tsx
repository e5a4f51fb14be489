import { CaptureUpdateAction, Excalidraw, newElementWith } from '@excalidraw/excalidraw';
import type { ExcalidrawImperativeAPI } from '@excalidraw/excalidraw/types';
import { useEffect, useMemo, useRef, useState } from 'react';
import type { BoardOp } from '../../../src/board/schema.js';
import type { ClientMessage } from '../../../realtime/protocol/clientMessages.js';
import type { Role } from '../../../src/domain/enums.js';
import type { ServerMessage } from '../../../realtime/protocol/serverMessages.js';
import type { ExEl } from './convert.js';
import { preloadBoardFonts } from './fonts.js';
import { wrapLabels } from './labels.js';
import { Overlays, type Viewport } from './Overlays.js';
import { BoardMenu } from '../ui/BoardMenu.js';
import { downloadNotes } from '../ui/notes.js';
import type { Together } from '../presence/Together.js';
import { PageBar } from './PageBar.js';
import { BoardImages } from './boardImages.js';
import { ImageTools } from './ImageTools.js';
import { importPdf } from './pdfImport.js';
import { BoardSync, type Change, type SyncView } from './sync.js';
import { reveal, setScene } from './scene.js';
import { SubjectTools, subjectSetup, type SubjectMode } from './SubjectTools.js';

export interface BoardHandle {
  message(msg: ServerMessage): void;
  connected(): void;
  disconnected(): void;
}

/** The tab's sessionStorage, which can be refused (an embedding page's settings, a full quota): then nothing is kept. */
const tabStore = {
  get(key: string): string | null {
    try {
      return sessionStorage.getItem(key);
    } catch {
      return null;
    }
  },
  set(key: string, value: string | null): void {
    try {
      if (value === null) sessionStorage.removeItem(key);
      else sessionStorage.setItem(key, value);
    } catch {
      // not kept
    }
  },
};

/**
 * The page each person is on, per lesson and per tab (a reload of the tab keeps it, another tab or a
 * later visit starts on the first page; storage refused: a reload starts on the first page, as before).
 */
const pageKey = (lessonId: string) => `board.page.${lessonId}`;

/**
 * My changes not yet acknowledged when the page went away (a reload a moment after the pen lifted),
 * per lesson and tab, taken back once by the reloaded page: BoardSync sends them again (storage
 * refused: a reload loses them, as before). Anything unreadable is ignored (the server checks every write).
 */
const keptKey = (lessonId: string) => `board.unacknowledged.${lessonId}`;
const takeKept = (lessonId: string): Change[] => {
  const raw = tabStore.get(keptKey(lessonId));
  tabStore.set(keptKey(lessonId), null);
  try {
    const list: unknown = raw ? JSON.parse(raw) : [];
    if (!Array.isArray(list)) return [];
    return list.filter((c): c is Change => (c?.kind === 'put' && typeof c.el?.id === 'string') || (c?.kind === 'del' && typeof c.t?.id === 'string' && typeof c.page === 'string'));
  } catch {
    return [];
  }
};

/**
 * The whiteboard: Excalidraw (pen, shapes, lines/arrows, text, eraser,
 * selection, undo/redo, colours, zoom/pan) plus our pages, subject tools and
 * overlays, kept in step with the server by BoardSync.
 */
export function Board(props: {
  lessonId: string;
  /** the link token: files go over HTTP with it in a header (docs/protocol.md, "Files") */
  token: string;
  role: Role;
  subject: SubjectMode;
  /** the gateway's frame limit (welcome.limits.max_payload_bytes): operations are cut to fit */
  maxFrameBytes: number;
  send: (msg: ClientMessage) => boolean;
  notify: (text: string) => void;
  onReady: (handle: BoardHandle) => void;
  /** the others on the board: pointers, laser, following (presence/Together.ts) */
  together?: Together;
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
        setScene: (els, fresh) => setScene(apiRef.current, els, fresh),
        clearHistory: () => apiRef.current?.history.clear(),
        reveal: () => reveal(apiRef.current),
        drawing: () => {
          const el = apiRef.current?.getAppState().newElement;
          return el && el.type === 'freedraw' ? el.id : null;
        },
        now: () => performance.now(),
        send: (m) => props.send(m),
        changed: (v) => {
          setView({ ...v });
          props.together?.setPage(v.page);
          tabStore.set(pageKey(props.lessonId), v.page);
        },
        notify: props.notify,
        lastPage: tabStore.get(pageKey(props.lessonId)),
        kept: takeKept(props.lessonId),
        roughness: setup.roughness,
        role: props.role,
        maxFrameBytes: props.maxFrameBytes,
      }),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [],
  );

  const images = useMemo(() => new BoardImages(props.lessonId, props.token, () => apiRef.current, props.notify), []); // eslint-disable-line react-hooks/exhaustive-deps
  const canvasRef = useRef<HTMLDivElement | null>(null);
  // a PDF import's progress ("Importing page 3 of 12"), and its cancel
  const [importing, setImporting] = useState<string | null>(null);
  const cancelImport = useRef<(() => void) | null>(null);
  const onPdf = (file: File) => {
    if (cancelImport.current) return props.notify('A PDF is being imported: wait for it, or cancel it first.');
    let cancelled = false;
    cancelImport.current = () => (cancelled = true);
    void importPdf(
      file,
      {
        transfer: images.transfer,
        role: props.role,
        pages: () => sync.view().pages,
        currentPage: () => sync.view().page,
        submit: (op) => sync.submit(op),
        addFiles: (files) => apiRef.current?.addFiles(files.map((f) => ({ ...f, created: Date.now() })) as never),
        notify: props.notify,
        progress: setImporting,
        takesImages: () => sync.takes('image'),
      },
      () => cancelled,
    ).finally(() => (cancelImport.current = null));
  };
  // Files dropped or pasted are the board's (images; PDFs: an import), never the editor's own handling,
  // which refused them with "Couldn't load invalid file" over the side panel. Caught before the editor
  // sees them: a drop on the board, a paste anywhere but a text field.
  const onPdfRef = useRef(onPdf);
  onPdfRef.current = onPdf;
  useEffect(() => {
    const el = canvasRef.current;
    const filesOf = (dt: DataTransfer | null) => [...(dt?.files ?? [])];
    const onDrop = (e: DragEvent) => {
      const files = filesOf(e.dataTransfer);
      if (!files.length) return;
      e.preventDefault();
      e.stopPropagation();
      void images.insert(files, { clientX: e.clientX, clientY: e.clientY }, onPdfRef.current);
    };
    const onPaste = (e: ClipboardEvent) => {
      const t = e.target as HTMLElement | null;
      if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.isContentEditable) && !t.closest('.excalidraw')) return;
      const files = filesOf(e.clipboardData);
      if (!files.length) return;
      e.preventDefault();
      e.stopImmediatePropagation();
      void images.insert(files, undefined, onPdfRef.current);
    };
    el?.addEventListener('drop', onDrop, true);
    window.addEventListener('paste', onPaste, true);
    return () => {
      el?.removeEventListener('drop', onDrop, true);
      window.removeEventListener('paste', onPaste, true);
    };
  }, [images]);

  // A click (or tap) on another person's pointer's name label follows them (docs/board.md, "Following"),
  // caught before the editor, which would start a selection there.
  useEffect(() => {
    const el = canvasRef.current;
    const together = props.together;
    if (!el || !together) return;
    const down = (e: PointerEvent) => {
      const canvas = e.target as HTMLElement | null;
      if (!canvas?.matches('canvas.interactive') || e.button !== 0) return;
      const r = canvas.getBoundingClientRect();
      const id = together.labelAt(e.clientX - r.left, e.clientY - r.top);
      if (!id) return;
      e.preventDefault();
      e.stopPropagation();
      together.follow(id);
    };
    el.addEventListener('pointerdown', down, true);
    return () => el.removeEventListener('pointerdown', down, true);
  }, [props.together]);

  /**
   * The board is handed to the connection only once the editor is ready:
   * Excalidraw calls onChange for the first time after it loaded its initial
   * data, which would otherwise replace a board.state applied before it (a
   * reload or a late join showed an empty board). Messages arriving meanwhile
   * wait in App's queue.
   */
  const ready = useRef(false);
  const editorReady = () => {
    if (ready.current || !apiRef.current) return;
    ready.current = true;
    props.together?.attach(apiRef.current, (id) => sync.goTo(id));
    props.onReady({
      message: (msg) => {
        if (msg.type === 'board.state') sync.onState(msg);
        else if (msg.type === 'board.ops') sync.onOps(msg);
        else if (msg.type === 'board.ack') sync.onAck(msg.ref, msg.seq, msg.skipped, msg.restamped);
        else if (msg.type === 'board.reject') sync.onReject(msg.ref, msg.code, msg.message);
        else if (msg.type === 'board.resync') sync.onResync();
        else if (msg.type === 'board.stroke') sync.onStroke(msg);
      },
      connected: () => {
        sync.connected();
        images.transfer.online();
      },
      disconnected: () => sync.disconnected(),
    });
  };

  const onChange = (elements: readonly unknown[], appState: { scrollX: number; scrollY: number; zoom: { value: number } }) => {
    editorReady();
    setSceneEls(elements as readonly ExEl[]);
    setViewport((v) => (v.scrollX === appState.scrollX && v.scrollY === appState.scrollY && v.zoom === appState.zoom.value ? v : { scrollX: appState.scrollX, scrollY: appState.scrollY, zoom: appState.zoom.value }));
    // Batch a burst of changes (a stroke being drawn) into one send every 60 ms.
    if (!throttle.current) {
      throttle.current = setTimeout(() => {
        throttle.current = null;
        sync.flushLocal();
        images.sweep();
      }, 60);
    }
  };

  // The page going away (a reload, the tab closed, a phone putting it in the background): what was drawn
  // is sent while the connection may still take it, and whatever is not acknowledged yet is kept for a
  // reload of this tab, which sends it again.
  useEffect(() => {
    const away = () => {
      if (throttle.current) {
        clearTimeout(throttle.current);
        throttle.current = null;
      }
      const kept = sync.leaving();
      tabStore.set(keptKey(props.lessonId), kept.length ? JSON.stringify(kept) : null);
    };
    const hidden = () => document.visibilityState === 'hidden' && away();
    window.addEventListener('pagehide', away);
    document.addEventListener('visibilitychange', hidden);
    return () => {
      window.removeEventListener('pagehide', away);
      document.removeEventListener('visibilitychange', hidden);
    };
  }, [sync, props.lessonId]);

  // The fonts in memory before anyone types (a text is measured once, with what the browser has then):
  // right after the board is first shown, so they never hold up the board itself; until then nobody can draw.
  const shownOnce = !!view;
  useEffect(() => {
    if (!shownOnce) return;
    preloadBoardFonts();
    // my uploads a reload interrupted go again, into the elements the board now has
    void images.resume();
  }, [shownOnce, images]);
  // labels wrapped before their font was in memory (a reload, a late join) are wrapped again with it
  useEffect(() => {
    const again = () => {
      const api = apiRef.current;
      if (!api) return;
      const els = api.getSceneElementsIncludingDeleted() as unknown as readonly ExEl[];
      const wrapped = wrapLabels(els, null, api.getAppState().editingTextElement?.id ?? null);
      if (wrapped !== els) api.updateScene({ elements: wrapped as never, captureUpdate: CaptureUpdateAction.NEVER });
    };
    document.fonts.addEventListener('loadingdone', again);
    return () => document.fonts.removeEventListener('loadingdone', again);
  }, []);

  const submit = (op: BoardOp) => sync.submit(op);
  /** The teacher's "Clear this page": every element of the page shown deleted, as one step of their undo. */
  const clearPage = () => {
    const api = apiRef.current;
    const name = view?.pages.find((p) => p.id === view.page)?.name ?? 'this page';
    if (!api || !window.confirm(`Clear everything on "${name}" for everyone? The other pages stay. Undo (Ctrl+Z) brings it back.`)) return;
    const elements = api.getSceneElementsIncludingDeleted().map((e) => (e.isDeleted ? e : newElementWith(e, { isDeleted: true })));
    api.updateScene({ elements, captureUpdate: CaptureUpdateAction.IMMEDIATELY });
  };
  // what the editor shows, for people's tests and the browser tests (ids, not content)
  const live = useMemo(() => sceneEls.filter((e) => !e.isDeleted), [sceneEls]);
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
      <div ref={canvasRef} className="board-canvas" data-testid="board" data-loaded={view ? 'true' : 'false'} data-elements={live.length} data-ids={live.map((e) => e.id).join(' ')} data-seq={view?.seq ?? 0} onPointerLeave={props.together?.leave}>
        <Excalidraw
          excalidrawAPI={(api) => (apiRef.current = api)}
          onChange={onChange as never}
          onPointerUpdate={props.together?.pointer}
          onScrollChange={props.together?.scrolled}
          isCollaborating
          // the editor's shortcuts (tools, Ctrl+Z, Delete) work after a click on a page tab or the side
          // panel too, not only once the canvas has the focus; never while typing in a field (chat, dialogs)
          handleKeyboardGlobally
          gridModeEnabled={setup.grid}
          UIOptions={{ tools: { image: false }, canvasActions: { loadScene: false, saveToActiveFile: false, export: false, saveAsImage: true, clearCanvas: false, toggleTheme: true } }}
          initialData={{ appState: { currentItemRoughness: setup.roughness, currentItemStrokeWidth: 2, gridSize: 20, viewBackgroundColor: '#ffffff' } as never }}
          renderTopRightUI={(isMobile) => (
            <SubjectTools subject={props.subject} api={apiRef} compact={isMobile}>
              <ImageTools images={images} compact={isMobile} onPdf={onPdf} busy={!!importing} />
            </SubjectTools>
          )}
        >
          <BoardMenu clearPage={props.role === 'teacher' ? clearPage : undefined} downloadNotes={() => void downloadNotes(props.lessonId, props.token, props.notify)} />
        </Excalidraw>
        <Overlays elements={sceneEls} view={viewport} />
        {importing && (
          <div className="pdf-progress" role="status" data-testid="pdf-progress">
            <span>{importing}</span>
            <button onClick={() => cancelImport.current?.()}>Cancel</button>
          </div>
        )}
        {/* Until the board is here nothing can be drawn: the editor's own start-up replaces its scene
            once (a stroke drawn in the first second after the page appeared was lost), and the first
            board.state is what the person draws on. */}
        {!view && (
          <div className="board-loading" data-testid="board-loading" role="status">
            Loading the board…
          </div>
        )}
      </div>
    </div>
  );
}
