import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { ExportLimits } from './export.js';
import type { RenderReply, RenderRequest } from './worker.js';

/** How many renders, how long, how much memory (settings BOARD_RENDER_*, docs/board.md "Bounded rendering"). */
export interface RenderLimits {
  /** renders at once on this process (one child process each) */
  concurrency: number;
  /** a render still running after this long is killed */
  timeoutMs: number;
  /** a render child whose resident memory passes this is killed */
  memoryMb: number;
  /** a render not started after waiting this long is refused (RenderBusy) */
  queueMs: number;
  /** the children read the pages themselves (worker.ts) */
  databaseUrl: string;
}

/** The queue is full or the wait was too long: try again later (the API answers 503 with Retry-After). */
export class RenderBusy extends Error {}
/** The render was killed (time or memory limit) or its process failed. */
export class RenderFailed extends Error {
  constructor(
    message: string,
    /** what stopped it, in a word (safe to tell a partner) */
    readonly reason: 'time' | 'memory' | 'failed',
  ) {
    super(message);
  }
}

export interface RenderResult {
  /** board seq and page the picture shows */
  seq: number;
  pageId: string;
  png: Buffer;
  approximate: boolean;
}

/** The board as a PDF (export.ts), or why there is none. */
export type ExportResult =
  | { kind: 'pdf'; seq: number; pdf: Buffer; pages: number }
  | { kind: 'empty'; seq: number }
  | { kind: 'too_large'; seq: number; reason: string };

/** What a child is asked to do, without the request id the slot adds. */
type Task = RenderRequest extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

interface Job {
  /** jobs with the same key share one render */
  key: string;
  task: Task;
  /** this job's time limit (an export has its own, longer than a preview's) */
  timeoutMs: number;
  background: boolean;
  resolve: (r: RenderReply | null) => void;
  reject: (e: Error) => void;
  /** what every caller asking for this page while it waits gets */
  shared: Promise<RenderReply | null>;
  /** the shared reply as its callers take it (one promise for all of them) */
  taken?: Promise<unknown>;
  timer?: NodeJS.Timeout;
}

const WATCH_MS = 50;
/** a child that is not ready this long after its start is killed (tsx compiles the sources on a test's first start) */
const STARTUP_MS = 15_000;
const RENDER_NICE = 10;
const PAGE = 4096;

/** Resident memory of a process in MB, from /proc (null where there is none). */
function rssMb(pid: number): number | null {
  try {
    return (Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]) * PAGE) / 1048576;
  } catch {
    return null;
  }
}

/**
 * Compiled, the child runs worker.js beside this file; from the TypeScript
 * sources (tests, `npm run dev`), worker.ts through tsx.
 */
function workerEntry(): { file: string; execArgv: string[] } {
  const self = fileURLToPath(import.meta.url);
  return self.endsWith('.ts') ? { file: self.replace(/pool\.ts$/, 'worker.ts'), execArgv: ['--import', 'tsx'] } : { file: self.replace(/pool\.js$/, 'worker.js'), execArgv: [] };
}

/**
 * One slot: a child process that renders one page at a time. It is kept
 * between renders (a fresh Node process costs ~50 ms and the fonts are parsed
 * once) and killed with SIGKILL when a render passes a limit; SIGKILL works
 * whatever the child is doing, even inside resvg's native code.
 */
class Slot {
  private child: ChildProcess | null = null;
  /** settles when the child has loaded its modules */
  private ready: Promise<void> = Promise.resolve();
  private seq = 0;
  busy = false;

  constructor(private readonly limits: RenderLimits) {}

  private spawn(): ChildProcess {
    const { file, execArgv } = workerEntry();
    const child = fork(file, [], {
      // V8's heap is capped below the watchdog's limit so that a heap blow-up ends as an exception, not a kill
      execArgv: [...execArgv, `--max-old-space-size=${Math.max(32, Math.floor(this.limits.memoryMb / 2))}`],
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env: { ...process.env, RENDER_DATABASE_URL: this.limits.databaseUrl },
    });
    this.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new RenderFailed(`the render process did not start within ${STARTUP_MS} ms`, 'time'));
      }, STARTUP_MS);
      const onMessage = (m: { ready?: boolean }) => {
        if (!m.ready) return;
        clearTimeout(timer);
        child.off('message', onMessage);
        resolve();
      };
      child.on('message', onMessage);
      child.once('exit', () => {
        clearTimeout(timer);
        reject(new RenderFailed('the render process exited while starting', 'failed'));
      });
    });
    this.ready.catch(() => undefined);
    child.on('error', () => undefined);
    // background work: the lessons served by this process go first when the cores are busy
    try {
      if (child.pid) setPriority(child.pid, RENDER_NICE);
    } catch {
      /* not permitted here: renders run at normal priority */
    }
    child.once('exit', () => {
      if (this.child === child) this.child = null;
    });
    return child;
  }

  async run(job: Job): Promise<RenderReply | null> {
    this.busy = true;
    const child = (this.child ??= this.spawn());
    child.ref();
    (child.channel as { ref?: () => void } | undefined)?.ref?.();
    try {
      await this.ready;
    } catch (err) {
      this.busy = false;
      throw err;
    }
    const id = ++this.seq;
    return new Promise<RenderReply | null>((resolve, reject) => {
      let settled = false;
      const done = (err: Error | null, result?: RenderReply | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timeout);
        clearInterval(watch);
        child.off('message', onMessage);
        child.off('exit', onExit);
        if (err && child.exitCode === null && child.signalCode === null) {
          child.kill('SIGKILL');
          // the next render starts a new child: this one is still dying until its 'exit' arrives
          if (this.child === child) this.child = null;
        }
        // an idle child must not keep the process alive
        child.unref();
        (child.channel as { unref?: () => void } | undefined)?.unref?.();
        this.busy = false;
        if (err) reject(err);
        else resolve(result ?? null);
      };
      const onMessage = (m: RenderReply) => {
        if (m.id !== id) return;
        if ('error' in m) done(new RenderFailed(`render failed: ${m.error}`, 'failed'));
        else if ('missing' in m) done(null, null);
        else done(null, m);
      };
      const onExit = (code: number | null, signal: string | null) => done(new RenderFailed(`render process exited (${signal ?? code})`, 'failed'));
      const timeout = setTimeout(() => done(new RenderFailed(`render took longer than ${job.timeoutMs} ms`, 'time')), job.timeoutMs);
      const watch = setInterval(() => {
        const mb = child.pid ? rssMb(child.pid) : null;
        if (mb !== null && mb > this.limits.memoryMb) done(new RenderFailed(`render used more than ${this.limits.memoryMb} MB`, 'memory'));
      }, WATCH_MS);
      child.on('message', onMessage);
      child.once('exit', onExit);
      const req = { id, ...job.task } as RenderRequest;
      child.send(req, (err) => err && done(new RenderFailed(`render process unreachable: ${err.message}`, 'failed')));
    });
  }

  kill(): void {
    this.child?.kill('SIGKILL');
    this.child = null;
  }
}

/**
 * Preview renders of one process, off its event loop and bounded: at most
 * `concurrency` at once, each in a child process with a time and a memory
 * limit; a render waits at most `queueMs` for a slot. Partners' reads go ahead
 * of the gateway's background renders. One pool per process and limits
 * (`RenderPool.shared`), so the API and the gateway of one process share it.
 */
export class RenderPool {
  private static readonly pools = new Map<string, RenderPool>();

  static shared(limits: RenderLimits): RenderPool {
    const key = JSON.stringify(limits);
    let pool = RenderPool.pools.get(key);
    if (!pool) RenderPool.pools.set(key, (pool = new RenderPool(limits)));
    return pool;
  }

  private readonly slots: Slot[];
  private readonly queue: Job[] = [];

  constructor(readonly limits: RenderLimits) {
    this.slots = Array.from({ length: limits.concurrency }, () => new Slot(limits));
  }

  /**
   * Renders a lesson's preview page as the board is now; null when the lesson
   * has no board. Rejects with RenderBusy or RenderFailed.
   */
  render(lessonId: string, width: number, opts: { background?: boolean } = {}): Promise<RenderResult | null> {
    const job = this.job(`png:${lessonId}:${width}`, { kind: 'png', lessonId, width }, this.limits.timeoutMs, opts.background ?? false);
    return this.take(job, (m) => (m && 'png' in m ? { seq: m.seq, pageId: m.pageId, png: Buffer.from(m.png.buffer, m.png.byteOffset, m.png.byteLength), approximate: m.approximate } : null));
  }

  /**
   * The whole board as a PDF (export.ts), within `limits` and its own time
   * limit; null when the lesson has no board. Rejects like `render`.
   */
  exportPdf(lessonId: string, limits: ExportLimits): Promise<ExportResult | null> {
    const job = this.job(`pdf:${lessonId}`, { kind: 'pdf', lessonId, limits }, limits.timeoutMs, false);
    return this.take(job, (m): ExportResult | null => {
      if (!m || !('export' in m)) return null;
      const e = m.export;
      return e.kind === 'pdf' ? { ...e, pdf: Buffer.from(e.pdf.buffer, e.pdf.byteOffset, e.pdf.byteLength) } : e;
    });
  }

  private take<T>(job: Job, read: (m: RenderReply | null) => T): Promise<T> {
    if (!job.taken) {
      job.taken = job.shared.then(read);
      job.taken.catch(() => undefined);
    }
    return job.taken as Promise<T>;
  }

  private job(key: string, task: Task, timeoutMs: number, background: boolean): Job {
    // a render of the same thing still waiting will read the board when it starts: share it
    const waiting = this.queue.find((j) => j.key === key);
    if (waiting) {
      if (waiting.background && !background) this.promote(waiting);
      return waiting;
    }
    return this.enqueue(key, task, timeoutMs, background);
  }

  private promote(job: Job): void {
    job.background = false;
    this.queue.splice(this.queue.indexOf(job), 1);
    const at = this.queue.findIndex((j) => j.background);
    this.queue.splice(at === -1 ? this.queue.length : at, 0, job);
  }

  private enqueue(key: string, task: Task, timeoutMs: number, background: boolean): Job {
    let resolve!: Job['resolve'];
    let reject!: Job['reject'];
    const shared = new Promise<RenderReply | null>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    shared.catch(() => undefined);
    const job: Job = { key, task, timeoutMs, background, resolve, reject, shared };
    // reads go before every waiting background render
    const at = background ? this.queue.length : this.queue.findIndex((j) => j.background);
    this.queue.splice(at === -1 ? this.queue.length : at, 0, job);
    job.timer = setTimeout(() => {
      const i = this.queue.indexOf(job);
      if (i === -1) return;
      this.queue.splice(i, 1);
      reject(new RenderBusy(`no render slot within ${this.limits.queueMs} ms`));
    }, this.limits.queueMs);
    this.next();
    return job;
  }

  private next(): void {
    for (const slot of this.slots) {
      if (slot.busy || !this.queue.length) continue;
      const job = this.queue.shift()!;
      clearTimeout(job.timer);
      slot
        .run(job)
        .then(job.resolve, job.reject)
        .finally(() => this.next());
    }
  }

  /** Kills the children (their renders fail) and refuses what waits. */
  close(): void {
    for (const job of this.queue.splice(0)) {
      clearTimeout(job.timer);
      job.reject(new RenderBusy('the render pool is closing'));
    }
    for (const s of this.slots) s.kill();
  }
}
