import type { Deps } from '../../../src/deps.js';
import { BoardWork, type Actor } from '../../../src/board/apply.js';
import { boardError } from '../../../src/board/errors.js';
import { LessonFeed, type BoardListener } from './feed.js';
import { PreviewService } from '../../../src/board/preview.js';
import { BoardCommitter, BoardRoom, type Ack } from './room.js';
import { causedByInput } from '../../../src/db/errors.js';
import { BoardOpSchema, type BoardElement, type SequencedOp } from '../../../src/board/schema.js';
import { BoardStore, type BoardRead } from '../../../src/board/store.js';
import { Batcher } from '../../../src/lib/Batcher.js';

/** Feeds starting within this many ms read their boards' seqs in one statement (a class arriving). */
const SEQ_BATCH_MS = 1;
const SEQ_BATCH_MAX = 200;

export interface BoardServiceOptions {
  /** most operations of one lesson committed in one transaction */
  maxBatch: number;
  /** most lessons committed in one transaction */
  maxLessons: number;
  /** transactions in flight at once on this node (each lesson in at most one) */
  commitConcurrency: number;
  /** how long a node waits for a missing seq before its listeners resync */
  gapMs: number;
  /** a preview is re-rendered this long after a lesson's last change on this node */
  previewDebounceMs: number;
  /** ... but at most once per this interval per lesson and node (reads render a stale picture themselves) */
  previewMinIntervalMs: number;
  previewWidth: number;
}

/**
 * How committed operations reach the other nodes: on the gateway, the
 * lesson's one bus channel (kind `board`, see feature.ts); a node hands what
 * it hears to the lesson's feed (`BoardService.received` for the feeds of
 * `listen`). Without a relay (the API, tools) the
 * operations stay on this node, and other nodes resync their pages when they
 * notice the gap.
 */
export interface BoardRelay {
  publish(lessonId: string, ops: SequencedOp[]): void;
}

/**
 * The board of every lesson on one node: what a gateway calls
 * (docs/board.md, "Wiring into the gateway").
 *
 * - `submit` validates an operation (zod, size limits), has it sequenced and
 *   stored by the lesson's BoardRoom, and resolves once it is durable.
 * - `openFeed` gives every committed operation of a lesson to its listeners
 *   here, in order, whichever node committed it (the relay carries them
 *   between nodes; Postgres decided the order); the gateway's Lesson holds its
 *   one feed, `listen` and `join` keep feeds here for callers without one.
 * - `read` serves the board state for a new or reconnecting client.
 * Previews are refreshed a little after each lesson's changes stop.
 */
export class BoardService {
  readonly store: BoardStore;
  private readonly committer: BoardCommitter;
  readonly previews: PreviewService;
  private readonly opts: BoardServiceOptions;
  private readonly rooms = new Map<string, BoardRoom>();
  /** the feeds `listen` opened, without a gateway (tools, tests); the gateway keeps each lesson's on its Lesson */
  private readonly feeds = new Map<string, LessonFeed>();
  /** feeds opened and not yet closed, however held (feedsOpen) */
  private openFeeds = 0;
  private readonly previewTimers = new Map<string, NodeJS.Timeout>();
  /** when this node last rendered each lesson's preview (ms, monotonic); entries go with the timer */
  private readonly previewRenderedAt = new Map<string, number>();
  /** lessons whose background render is due, oldest first; rendered one at a time (see renderNext) */
  private readonly renderQueue = new Set<string>();
  private rendering: Promise<void> | null = null;
  /** set by the gateway's board feature (the lesson bus) */
  relay: BoardRelay | undefined;
  /**
   * Set by the gateway's board feature: the feed of a lesson open on this node, kept on its Lesson,
   * where this node's commits reach it (what other nodes commit reaches it through the Lesson too).
   */
  lessonFeed: ((lessonId: string) => LessonFeed | undefined) | undefined;
  /** set by the gateway's board feature: counts each lesson whose commit failed for good (its metrics) */
  onCommitFailed: ((cause: 'transient' | 'lesson') => void) | undefined;
  private readonly log: Deps['log'];
  private closed = false;
  /**
   * The board seqs feeds start at (and close a gap at): the lessons opening within a millisecond
   * share one statement, as a class arriving opens hundreds at once.
   */
  private readonly seqs: Batcher<string, number>;

  constructor(
    private readonly deps: Pick<Deps, 'sql' | 'readSql' | 'clock' | 'log' | 'config'>,
    opts: Partial<BoardServiceOptions> = {},
  ) {
    this.opts = {
      maxBatch: opts.maxBatch ?? 200,
      maxLessons: opts.maxLessons ?? deps.config.BOARD_COMMIT_MAX_LESSONS,
      commitConcurrency: opts.commitConcurrency ?? deps.config.BOARD_COMMIT_CONCURRENCY,
      gapMs: opts.gapMs ?? deps.config.BOARD_RELAY_GAP_MS,
      previewDebounceMs: opts.previewDebounceMs ?? deps.config.BOARD_PREVIEW_DEBOUNCE_MS,
      previewMinIntervalMs: opts.previewMinIntervalMs ?? deps.config.BOARD_PREVIEW_MIN_INTERVAL_MS,
      previewWidth: opts.previewWidth ?? deps.config.BOARD_PREVIEW_WIDTH,
    };
    this.log = deps.log.child({ component: 'board' });
    this.store = new BoardStore(deps.sql);
    this.committer = new BoardCommitter(this.store, {
      maxBatch: this.opts.maxBatch,
      maxLessons: this.opts.maxLessons,
      concurrency: this.opts.commitConcurrency,
      now: () => this.deps.clock.now(),
      onFailure: (err, lessonIds) => {
        const code = (err as { code?: string }).code;
        const cause = causedByInput(err) ? 'lesson' : 'transient';
        for (let i = 0; i < lessonIds.length; i++) this.onCommitFailed?.(cause);
        this.log.error(
          { err: (err as Error).message, code, cause, ...(lessonIds.length === 1 ? { lesson_id: lessonIds[0] } : { lesson_ids: lessonIds }) },
          'board commit failed: operations refused as unavailable',
        );
      },
    });
    this.previews = new PreviewService(deps.sql, deps.clock, this.opts.previewWidth, deps.config);
    this.seqs = new Batcher((ids) => this.store.seqs(deps.readSql, ids), {
      delayMs: SEQ_BATCH_MS,
      max: SEQ_BATCH_MAX,
      concurrency: deps.config.DATABASE_READ_POOL_SIZE,
    });
  }

  /**
   * Checks the start of a stroke in progress (`head`: the freehand element without its points) by
   * the rules of the `element.add` that will commit it: the lock, the pin, the page, the element
   * id, the role. Throws the BoardOpError the commit would get. One read, from the read pool.
   */
  async admitStroke(lessonId: string, head: Omit<Extract<BoardElement, { type: 'freehand' }>, 'points'>, actor: Actor): Promise<void> {
    const state = await this.store.admission(this.deps.readSql, lessonId, [head.id]);
    if (!state) throw boardError('archived', 'the lesson was deleted');
    const el = { ...head, points: [[0, 0]] } as BoardElement;
    new BoardWork(state.head, state.elements).admit({ type: 'element.add', elements: [el] }, actor);
  }

  /**
   * Validates and applies one operation sent by a participant. `raw` is the
   * parsed JSON of the operation; `origin` is an opaque id of the sending
   * connection, handed back on the relayed operation so the gateway can ack
   * its sender instead of echoing it. Rejects with a BoardOpError.
   */
  async submit(lessonId: string, raw: unknown, actor: Actor, origin?: string): Promise<Ack> {
    if (this.closed) throw boardError('unavailable', 'the board service is stopping');
    const parsed = BoardOpSchema.safeParse(raw);
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      const tooBig = parsed.error.issues.some((i) => i.code === 'too_big');
      throw boardError(tooBig ? 'too_large' : 'invalid', `${first.path.join('.') || 'op'}: ${first.message}`);
    }
    const op = parsed.data;
    if (!this.deps.config.FILE_IMAGES && (op.type === 'element.add' || op.type === 'element.update') && op.elements.some((e) => e.type === 'image')) {
      // as a node from before images refuses them (its board.state lists no `image`: pages hold them back)
      throw boardError('invalid', 'Images cannot be added on this server at the moment: try again in a few minutes.');
    }
    let room = this.rooms.get(lessonId);
    if (!room) {
      room = new BoardRoom(lessonId, this.committer, (ops) => this.onCommitted(lessonId, ops));
      this.rooms.set(lessonId, room);
    }
    try {
      return await room.submit(op, actor, origin);
    } finally {
      if (room.idle && this.rooms.get(lessonId) === room) this.rooms.delete(lessonId);
    }
  }

  /** Board state for a client: everything, or what changed after `since` (docs/protocol.md, `board.sync`). */
  read(lessonId: string, since?: number): Promise<BoardRead> {
    return this.store.read(lessonId, since);
  }

  /**
   * A new feed of the lesson's committed operations on this node, for its holder to give what
   * this node hears of the lesson (`push`) and to close (the gateway's Lesson holds one from its
   * opening to its closing, once its bus channel is subscribed: every commit published after that
   * is heard). It starts at once: it holds what it hears until it knows where the board stands, a
   * read of the board's seq that the feeds opening within a millisecond share. `started()` resolves
   * then: a client's first read or write of the board awaits it, so that everything committed after
   * what it read reaches it, but the lesson's opening does not (a class's first arrivals do not wait
   * for a Postgres read before welcome).
   */
  openFeed(lessonId: string): LessonFeed {
    const f = new LessonFeed(this.opts.gapMs, () => this.seqs.add(lessonId), () => void this.openFeeds--);
    this.openFeeds++;
    f.started().catch((err) => this.log.warn({ err: (err as Error).message, lesson_id: lessonId }, 'board seq unavailable: the feed holds what it hears and reads again'));
    return f;
  }

  /** Feeds open on this node, however held (tests: a lesson's feed closes with it). */
  feedsOpen(): number {
    return this.openFeeds;
  }

  /**
   * Starts relaying a lesson's operations to a local listener without a gateway (tools, tests):
   * the lesson's feed here (openFeed) is shared by its listeners and kept by this service until
   * the last one leaves. `started` resolves with the seq the feed started from; `leave` stops it.
   * Operations from other nodes reach it through `received`.
   */
  listen(lessonId: string, listener: BoardListener): { started: () => Promise<number>; leave: () => void } {
    let f = this.feeds.get(lessonId);
    if (!f) this.feeds.set(lessonId, (f = this.openFeed(lessonId)));
    const feed = f;
    feed.listeners.add(listener);
    return {
      started: () => feed.started().then(() => feed.seq ?? 0),
      leave: () => {
        feed.listeners.delete(listener);
        if (feed.listeners.size === 0 && this.feeds.get(lessonId) === feed) {
          feed.close();
          this.feeds.delete(lessonId);
        }
      },
    };
  }

  /** listen(), resolved once the feed has started (rejects, listening to nothing, if the board's seq could not be read). */
  async join(lessonId: string, listener: BoardListener): Promise<{ seq: number; leave: () => void }> {
    const l = this.listen(lessonId, listener);
    try {
      return { seq: await l.started(), leave: l.leave };
    } catch (err) {
      l.leave();
      throw err;
    }
  }

  private onCommitted(lessonId: string, ops: SequencedOp[]): void {
    // to the lesson's feed here: on its Lesson on a gateway, here for listen's
    this.lessonFeed?.(lessonId)?.push(ops);
    this.feeds.get(lessonId)?.push(ops);
    // A lost publish: other nodes notice the gap with the next operation and resync their pages from Postgres.
    this.relay?.publish(lessonId, ops);
    this.schedulePreview(lessonId);
  }

  /** Operations another node committed (from the relay), for the feeds of `listen`. */
  received(lessonId: string, ops: SequencedOp[]): void {
    this.feeds.get(lessonId)?.push(ops);
  }

  /**
   * The debounced background render: BOARD_PREVIEW_DEBOUNCE_MS after the
   * lesson's last change here, and no sooner than BOARD_PREVIEW_MIN_INTERVAL_MS
   * after this node's previous render of it. A teacher pausing between strokes
   * would otherwise cost one render per stroke; a partner reading in between
   * gets a current picture anyway (a stale one is rendered on read).
   */
  private schedulePreview(lessonId: string): void {
    const prev = this.previewTimers.get(lessonId);
    if (prev) clearTimeout(prev);
    const last = this.previewRenderedAt.get(lessonId);
    const delay = Math.max(this.opts.previewDebounceMs, last === undefined ? 0 : last + this.opts.previewMinIntervalMs - performance.now());
    const t = setTimeout(() => {
      this.previewTimers.delete(lessonId);
      this.renderSoon(lessonId);
    }, delay);
    t.unref();
    this.previewTimers.set(lessonId, t);
  }

  /**
   * Nobody is left in the lesson on this node (the gateway says so): render
   * now what changed since this node's last render, without waiting for the
   * debounce or the interval. Partners mostly read thumbnails after lessons.
   */
  lessonLeft(lessonId: string): void {
    const t = this.previewTimers.get(lessonId);
    if (!t) return; // nothing changed here since the last render
    clearTimeout(t);
    this.previewTimers.delete(lessonId);
    this.renderSoon(lessonId);
  }

  /**
   * Background renders go through one queue per node, one at a time: when a
   * thousand lessons pause at once (lessons start on the hour), their renders
   * (~8 ms of CPU each for a small board, on the thread pool) take at most one
   * core for a while instead of every core at once, which would hold up the
   * board operations and everything else of the node. A partner's read never
   * waits for this queue: it renders a stale picture itself.
   */
  private renderSoon(lessonId: string): void {
    const at = performance.now();
    this.previewRenderedAt.set(lessonId, at);
    // forget the lesson once a further interval passed without a change or a
    // later render (both ways to a render lead here, so no entry outlives it)
    setTimeout(() => {
      if (!this.previewTimers.has(lessonId) && this.previewRenderedAt.get(lessonId) === at) this.previewRenderedAt.delete(lessonId);
    }, this.opts.previewMinIntervalMs).unref();
    this.renderQueue.add(lessonId);
    this.rendering ??= this.renderNext();
  }

  private async renderNext(): Promise<void> {
    for (const lessonId of this.renderQueue) {
      this.renderQueue.delete(lessonId);
      await this.previews.refresh(lessonId).catch((err: Error) => this.log.warn({ lesson_id: lessonId, err: err.message }, 'preview render failed'));
    }
    this.rendering = null;
  }

  /** Stops: waits for queued operations, renders pending previews, drops subscriptions. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.rooms.values()].map((r) => r.settled()));
    for (const [id, t] of this.previewTimers) {
      clearTimeout(t);
      this.renderQueue.add(id);
    }
    this.previewTimers.clear();
    this.rendering ??= this.renderNext();
    await this.rendering;
    for (const f of this.feeds.values()) f.close();
    this.feeds.clear();
  }
}
