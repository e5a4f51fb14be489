import { getVisibleSceneBounds, zoomToFitBounds } from '@excalidraw/excalidraw';
import type { AppState, Collaborator, ExcalidrawImperativeAPI, OnUserFollowedPayload, SocketId } from '@excalidraw/excalidraw/types';
import type { ClientMessage } from '../../../realtime/protocol/clientMessages.js';
import type { Person, ServerMessageOf } from '../../../realtime/protocol/serverMessages.js';
import { PageViews } from '../board/pageViews.js';

/** A remote pointer not moved for this long is no longer shown (the person stepped away from the board). */
export const POINTER_IDLE_MS = 5000;
/** Views for followers: at most 10 a second (the gateway's budget), the last one always sent. */
export const VIEW_INTERVAL_MS = 100;
/** The page's pointer rate: below the gateway's per-person budget, never faster than a 25 Hz screen needs. */
export const pointerInterval = (cursorsPerSecond: number) => Math.max(40, Math.ceil(1000 / Math.max(1, cursorsPerSecond * 0.8)));

type Tool = 'pointer' | 'laser';
type Button = 'up' | 'down';
interface Pointer {
  x: number;
  y: number;
  page: string | undefined;
  tool: Tool;
  button: Button;
  at: number;
}
type Bounds = [number, number, number, number];
type ViewFrame = ServerMessageOf<'view'>;

/** What the page shows of following (the badge is the editor's own; these are ours). */
export interface TogetherState {
  /** the person I follow, or null */
  following: string | null;
  /** the teacher everyone follows ("Everyone follow me"), or null */
  lead: string | null;
  /** who follows whom, by follower */
  follows: ReadonlyMap<string, string>;
}

export const NOBODY_FOLLOWS: TogetherState = { following: null, lead: null, follows: new Map() };

/** Runs `fn` at most every `ms`, with the last arguments (a trailing call is never lost). */
class Coalescer<T> {
  private last = -Infinity;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private pending: T | null = null;
  constructor(
    private readonly ms: number,
    private readonly fn: (v: T) => void,
    private readonly now: () => number,
  ) {}
  push(v: T, urgent = false): void {
    this.pending = v;
    const wait = this.last + this.ms - this.now();
    if (urgent || wait <= 0) return this.flush();
    this.timer ??= setTimeout(() => this.flush(), wait);
  }
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.pending === null) return;
    const v = this.pending;
    this.pending = null;
    this.last = this.now();
    this.fn(v);
  }
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.pending = null;
  }
}

/**
 * The others on the board (docs/board.md, "Pointers, following and the laser"), with the editor's own
 * collaboration model: my pointer goes out from Excalidraw's `onPointerUpdate` (scene coordinates, the
 * laser tool included), the others' are shown through `updateScene({ collaborators })` (their cursor,
 * name and colour, and the laser trail, drawn by the editor), and following uses the editor's
 * `userToFollow` (its "Following …" badge, unfollowed by my own pan or zoom) with the leader's visible
 * bounds fitted into my window. Nothing here is stored: it is all ephemeral frames.
 */
export class Together {
  private api: ExcalidrawImperativeAPI | null = null;
  private goTo: (page: string) => void = () => {};
  private page: string | null = null;
  private readonly people = new Map<string, Person>();
  private readonly pointers = new Map<string, Pointer>();
  private readonly follows = new Map<string, string>();
  private lead: string | null = null;
  private following: string | null = null;
  /** the view of the person I follow, applied again after a page switch it asked for */
  private lastView: ViewFrame | null = null;
  /** my own view of each page, restored when I come back to it (the editor holds one page at a time) */
  private readonly pageViews = new PageViews();
  private readonly cursorOut: Coalescer<ClientMessage>;
  private readonly viewOut: Coalescer<true>;
  /** whether my pointer is on the board as far as the others know */
  private shown = false;
  private lastButton: Button = 'up';
  private frame = 0;
  private readonly idle: ReturnType<typeof setInterval>;
  private readonly listeners = new Set<() => void>();
  /** the pointers the editor draws, where they fall on its canvas (for a click on a name label) */
  private shownPointers: ShownPointer[] = [];
  private snapshot: TogetherState = NOBODY_FOLLOWS;

  constructor(
    readonly me: Person,
    private readonly send: (m: ClientMessage) => boolean,
    cursorsPerSecond: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.cursorOut = new Coalescer(pointerInterval(cursorsPerSecond), (m) => this.send(m), now);
    this.viewOut = new Coalescer(VIEW_INTERVAL_MS, () => this.sendView(), now);
    this.idle = setInterval(() => this.dropIdle(), 1000);
    document.addEventListener('visibilitychange', this.hidden);
  }

  private readonly hidden = (): void => {
    if (document.visibilityState === 'hidden') this.leave();
  };

  // ---- the editor ----

  /** The editor is ready; `goTo` switches my page (BoardSync.goTo). */
  attach(api: ExcalidrawImperativeAPI, goTo: (page: string) => void): void {
    this.api = api;
    this.goTo = goTo;
    // the editor tells of following through its API only (its onUserFollow prop is not wired in 0.18)
    api.onUserFollow(this.userFollow);
    publishView(api);
    this.render();
    if (this.lead && this.me.role === 'student') this.startFollowing(this.lead);
  }

  /** The page I am on (after every page switch). */
  setPage(page: string): void {
    if (page === this.page) return;
    this.page = page;
    this.render();
    const mine = this.pageViews.of(page);
    if (this.lastView && this.lastView.page === page) this.fit(this.lastView);
    else if (mine && this.api) this.api.updateScene({ appState: { scrollX: mine.scrollX, scrollY: mine.scrollY, zoom: { value: mine.zoom as never } } });
    this.viewChanged(true);
  }

  /** Excalidraw's onPointerUpdate: my pointer in scene coordinates. */
  pointer = (p: { pointer: { x: number; y: number; tool: Tool }; button: Button }): void => {
    if (!this.page || document.visibilityState === 'hidden') return;
    const m: ClientMessage = { type: 'cursor', x: round(p.pointer.x), y: round(p.pointer.y), page: this.page, ...(p.pointer.tool === 'laser' ? { tool: 'laser' as const } : {}), button: p.button };
    // a press or a release goes out at once: a laser trail starts and ends where it did
    const urgent = p.button !== this.lastButton;
    this.lastButton = p.button;
    this.shown = true;
    this.cursorOut.push(m, urgent);
  };

  /**
   * My pointer left the board (off the canvas, the tab hidden): the others stop showing it. A finger
   * lifted from a touch screen "leaves" after every tap: its pointer stays where it touched until idle.
   */
  leave = (e?: { pointerType?: string }): void => {
    if (e?.pointerType === 'touch') return;
    this.cursorOut.cancel();
    if (!this.shown) return;
    this.shown = false;
    this.send({ type: 'cursor.leave' });
  };

  /** Excalidraw's onScrollChange: my view moved (pan, zoom, a resize, a fitted view). */
  scrolled = (scrollX: number, scrollY: number, zoom: { value: number }): void => {
    this.viewChanged(false);
    if (this.page) this.pageViews.moved(this.page, { scrollX, scrollY, zoom: zoom.value });
    if (this.api) publishView(this.api);
  };

  /** Excalidraw's onUserFollow: following started or ended (my pan, its badge's button, Esc, the person gone). */
  userFollow = (p: OnUserFollowedPayload): void => {
    const id = p.action === 'FOLLOW' ? p.userToFollow.socketId : null;
    if (id === this.following) return;
    this.following = id;
    this.lastView = null;
    this.send({ type: 'follow', to: id });
    this.changed();
  };

  /** Follow a person (a click on their name), or stop (null). */
  follow(id: string | null): void {
    if (id === null) this.api?.updateScene({ appState: { userToFollow: null } });
    else this.startFollowing(id);
  }

  /**
   * The person whose pointer's name label is at (x, y) of the board's canvas (CSS pixels from its top
   * left), or null: a click there follows them (Board catches it before the editor would select).
   */
  labelAt(x: number, y: number): string | null {
    const api = this.api;
    if (!api) return null;
    const { width, height } = api.getAppState();
    for (const p of [...this.shownPointers].reverse()) {
      const [x1, y1, x2, y2] = labelBox(p.sx, p.sy, p.name);
      // the editor draws no label for a pointer off its canvas
      if (p.sx < 0 || p.sy < 0 || p.sx > width - 11 || p.sy > height - 14) continue;
      if (x >= x1 && x <= x2 && y >= y1 && y <= y2) return p.id;
    }
    return null;
  }

  /** The teacher's "Everyone follow me" and its stop. */
  setLead(on: boolean): void {
    this.send({ type: 'lead', on });
  }

  // ---- the gateway ----

  welcome(w: { you: Person; people: Person[]; lead?: string | null }): void {
    this.people.clear();
    for (const p of w.people) if (p.id !== this.me.id) this.people.set(p.id, p);
    this.pointers.clear();
    this.follows.clear();
    this.lead = w.lead ?? null;
    // a reconnect: the others learn again whom I follow
    if (this.following) this.send({ type: 'follow', to: this.following });
    if (this.lead && this.me.role === 'student' && this.following !== this.lead) this.startFollowing(this.lead);
    this.render();
    this.changed();
  }

  joined(p: Person): void {
    if (p.id === this.me.id) return;
    this.people.set(p.id, p);
    // the newcomer learns whom I follow
    if (this.following) this.send({ type: 'follow', to: this.following });
    this.render();
    if (p.id === this.lead && this.me.role === 'student' && !this.following) this.startFollowing(p.id);
  }

  /** A person left (every tab gone, or removed): their pointer goes at once. */
  left(id: string): void {
    this.people.delete(id);
    this.pointers.delete(id);
    this.follows.delete(id);
    this.render();
    this.changed();
  }

  everyone(people: Person[]): void {
    const ids = new Set(people.map((p) => p.id));
    for (const id of [...this.people.keys()]) if (!ids.has(id)) this.left(id);
    for (const p of people) this.joined(p);
  }

  cursor(m: ServerMessageOf<'cursor'>): void {
    this.pointers.set(m.from, { x: m.x, y: m.y, page: m.page, tool: m.tool ?? 'pointer', button: m.button ?? 'up', at: this.now() });
    this.render();
  }

  cursorLeave(from: string): void {
    if (this.pointers.delete(from)) this.render();
  }

  view(m: ViewFrame): void {
    if (m.from !== this.following) return;
    this.lastView = m;
    if (m.page !== this.page) this.goTo(m.page); // setPage fits it once the page is shown
    else this.fit(m);
  }

  followed(from: string, to: string | null): void {
    const before = this.follows.get(from);
    if (to) this.follows.set(from, to);
    else this.follows.delete(from);
    if (before === to) return;
    // a new follower of mine needs my view now, not at my next move
    if (to === this.me.id) this.viewChanged(true);
    this.changed();
  }

  leadBy(by: string | null): void {
    const was = this.lead;
    this.lead = by;
    if (this.me.role === 'student') {
      if (by) this.startFollowing(by);
      else if (was && this.following === was) this.follow(null);
    }
    if (by === this.me.id) this.viewChanged(true);
    this.changed();
  }

  // ---- React ----

  subscribe = (fn: () => void): (() => void) => {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  };
  state = (): TogetherState => this.snapshot;

  /** who follows me (for the teacher) */
  followersOf(id: string): string[] {
    return [...this.follows].filter(([, to]) => to === id).map(([from]) => from);
  }
  nameOf(id: string): string {
    return this.people.get(id)?.name ?? (id === this.me.id ? this.me.name : 'someone');
  }

  close(): void {
    clearInterval(this.idle);
    document.removeEventListener('visibilitychange', this.hidden);
    this.cursorOut.cancel();
    this.viewOut.cancel();
    cancelAnimationFrame(this.frame);
  }

  // ---- inside ----

  private startFollowing(id: string): void {
    const p = this.people.get(id);
    if (!this.api || !p || id === this.me.id) return;
    // the editor ends following when the followed one is not among its collaborators: they go in first
    this.flush();
    this.api.updateScene({ appState: { userToFollow: { socketId: id as SocketId, username: p.name } } });
  }

  private fit(v: ViewFrame): void {
    const api = this.api;
    if (!api || v.x2 <= v.x1 || v.y2 <= v.y1) return;
    const appState = api.getAppState();
    const fitted = zoomToFitBounds({ bounds: [v.x1, v.y1, v.x2, v.y2] as Bounds as never, appState, fitToViewport: true, viewportZoomFactor: 1 }).appState;
    api.updateScene({ appState: { scrollX: fitted.scrollX, scrollY: fitted.scrollY, zoom: fitted.zoom } });
  }

  /** My view goes out only while someone follows me (or I lead): nobody else uses it. */
  private viewChanged(urgent: boolean): void {
    const watched = this.lead === this.me.id || [...this.follows.values()].includes(this.me.id);
    if (watched && this.api && this.page) this.viewOut.push(true, urgent);
  }

  private sendView(): void {
    const api = this.api;
    if (!api || !this.page) return;
    const [x1, y1, x2, y2] = getVisibleSceneBounds(api.getAppState() as AppState);
    this.send({ type: 'view', page: this.page, x1: round(x1), y1: round(y1), x2: round(x2), y2: round(y2) });
  }

  private dropIdle(): void {
    const t = this.now();
    let gone = false;
    for (const [id, p] of this.pointers) if (t - p.at > POINTER_IDLE_MS && !(p.tool === 'laser' && p.button === 'down')) gone = this.pointers.delete(id) || gone;
    if (gone) this.render();
  }

  /** The others as the editor's collaborators, once per animation frame however many pointers moved. */
  private render(): void {
    if (this.frame || !this.api) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.flush();
    });
  }

  /** The others to the editor now. */
  private flush(): void {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    const api = this.api;
    if (!api) return;
    const collaborators = new Map<SocketId, Collaborator>();
    // everyone present is a collaborator (the editor's avatars; following ends if the followed one is missing);
    // a pointer is shown only on the page it is on
    for (const [id, p] of this.people) {
      const ptr = this.pointers.get(id);
      const here = ptr && ptr.page === this.page;
      collaborators.set(id as SocketId, {
        id,
        socketId: id as SocketId,
        username: p.name,
        ...(here ? { pointer: { x: ptr.x, y: ptr.y, tool: ptr.tool }, button: ptr.button } : {}),
      });
    }
    api.updateScene({ collaborators });
    this.shownPointers = publishPointers(api, collaborators);
  }


  private changed(): void {
    this.snapshot = { following: this.following, lead: this.lead, follows: new Map(this.follows) };
    for (const fn of this.listeners) fn();
  }
}

const round = (n: number) => Math.round(n * 10) / 10;

/**
 * The pointers the editor was given, with where they fall on this screen, in a data attribute of the
 * board (ids and positions, no content): what the browser tests and the benchmark look for.
 */
function publishPointers(api: ExcalidrawImperativeAPI, collaborators: Map<SocketId, Collaborator>): ShownPointer[] {
  const s = api.getAppState();
  const shown = [...collaborators.values()]
    .filter((c) => c.pointer)
    .map((c) => ({
      id: c.id ?? '',
      name: c.username ?? '',
      tool: c.pointer!.tool,
      x: c.pointer!.x,
      y: c.pointer!.y,
      // viewport position within the canvas (the editor's sceneCoordsToViewportCoords, less its offset)
      sx: Math.round((c.pointer!.x + s.scrollX) * s.zoom.value),
      sy: Math.round((c.pointer!.y + s.scrollY) * s.zoom.value),
    }));
  const el = document.querySelector('[data-testid=board]');
  if (!el) return shown;
  el.setAttribute('data-pointers', JSON.stringify(shown));
  // wall-clock ms with sub-ms precision: comparable between two pages of one machine (the benchmark)
  el.setAttribute('data-pointers-at', String(performance.timeOrigin + performance.now()));
  return shown;
}

interface ShownPointer {
  id: string;
  name: string;
  sx: number;
  sy: number;
}

let measure: CanvasRenderingContext2D | null = null;
/**
 * Where the editor draws a pointer's name label (its renderRemoteCursors: the label's box starts below
 * and right of the cursor's tip, text in 600 12px sans-serif with 5 px by 3 px of padding), a little
 * larger so a finger finds it too.
 */
function labelBox(sx: number, sy: number, name: string): [number, number, number, number] {
  measure ??= document.createElement('canvas').getContext('2d');
  if (measure) measure.font = '600 12px sans-serif';
  const w = (measure?.measureText(name).width ?? name.length * 7) + 14;
  const x1 = sx + 5.5 - 1;
  const y1 = sy + 16 - 1;
  return [x1 - 4, y1 - 4, x1 + w + 4, y1 + 22 + 4];
}

/** What this screen shows of the board (scene bounds), in a data attribute of the board, for the browser tests. */
function publishView(api: ExcalidrawImperativeAPI): void {
  const s = api.getAppState();
  document.querySelector('[data-testid=board]')?.setAttribute('data-view', JSON.stringify({ bounds: getVisibleSceneBounds(s as AppState).map(Math.round), zoom: s.zoom.value }));
}
