import type { Config } from '../config.js';
import type { Sql } from '../db/index.js';
import { Errors, type AppError } from '../errors.js';
import type { Clock } from '../lib/clock.js';
import { RenderBusy, RenderFailed, RenderPool } from './render/pool.js';

export { previewPageId } from './render/page.js';

export interface Preview {
  png: Buffer;
  /** board seq the picture shows */
  seq: number;
  page_id: string;
  rendered_at: Date;
  /** the render budget simplified or left something out (only known right after a render) */
  approximate?: boolean;
}

export type RenderSettings = Pick<Config, 'DATABASE_URL' | 'BOARD_RENDER_CONCURRENCY' | 'BOARD_RENDER_TIMEOUT_MS' | 'BOARD_RENDER_MEMORY_MB' | 'BOARD_RENDER_QUEUE_MS'>;

/** The process's render pool for these settings (shared by the API's reads and the gateway's background renders). */
export function renderPool(c: RenderSettings): RenderPool {
  return RenderPool.shared({ concurrency: c.BOARD_RENDER_CONCURRENCY, timeoutMs: c.BOARD_RENDER_TIMEOUT_MS, memoryMb: c.BOARD_RENDER_MEMORY_MB, queueMs: c.BOARD_RENDER_QUEUE_MS, databaseUrl: c.DATABASE_URL });
}

/**
 * A read that finds no render slot in time, or whose render was stopped by a
 * limit: 503 `unavailable` with Retry-After (docs/api-decisions.md).
 */
export function previewUnavailable(err: unknown, retryAfterSeconds: number, what: 'preview' | 'export' = 'preview'): AppError {
  const why =
    err instanceof RenderBusy
      ? `The ${what} renderer is busy`
      : `The ${what} could not be rendered within its limits (${err instanceof RenderFailed ? err.reason : 'failed'})`;
  const e = Errors.unavailable(`${why}; try again later`, retryAfterSeconds);
  // the whole story, for whoever logs it (the message tells the partner only which limit, in a word)
  e.cause = err;
  return e;
}

/**
 * Board previews: a PNG of the pinned (else first) page, cached in Postgres
 * with the board seq it shows. `get` answers the cached picture while it is
 * current and renders a new one when the board has moved on, so a read is
 * never stale; gateways call `refresh` a couple of seconds after drawing stops
 * so that reads usually find a current picture (docs/board.md, "Preview").
 * Renders of one lesson are single-flight per process; every render goes
 * through the process's bounded RenderPool (render/pool.ts). A render that
 * cannot run or finish within its limits rejects with a 503 AppError.
 */
export class PreviewService {
  private readonly inflight = new Map<string, Promise<Preview | null>>();
  private readonly pool: RenderPool;

  constructor(
    private readonly sql: Sql,
    private readonly clock: Clock,
    private readonly width: number,
    private readonly settings: RenderSettings,
  ) {
    this.pool = renderPool(settings);
  }

  /** The current preview, or null while the board has never had content (404 no_preview). */
  get(lessonId: string, background = false): Promise<Preview | null> {
    const running = this.inflight.get(lessonId);
    if (running) return running;
    const p = this.getOrRender(lessonId, background).finally(() => this.inflight.delete(lessonId));
    this.inflight.set(lessonId, p);
    return p;
  }

  /** Brings the stored preview up to date (no-op when it is); the gateway's background render. */
  async refresh(lessonId: string): Promise<void> {
    await this.get(lessonId, true);
  }

  private async getOrRender(lessonId: string, background: boolean): Promise<Preview | null> {
    const [row] = await this.sql<{ seq: number; first_content_seq: number | null; p_seq: number | null; png: Buffer | null; page_id: string | null; rendered_at: Date | null }[]>`
      SELECT b.seq, b.first_content_seq, p.seq AS p_seq, p.png, p.page_id, p.rendered_at
      FROM boards b LEFT JOIN board_previews p ON p.lesson_id = b.lesson_id
      WHERE b.lesson_id = ${lessonId}`;
    if (!row || row.first_content_seq === null) return null;
    if (row.p_seq !== null && row.p_seq >= row.seq) {
      return { png: row.png!, seq: row.p_seq, page_id: row.page_id!, rendered_at: row.rendered_at! };
    }
    // The render child reads the page itself (render/page.ts): a large page never reaches this process.
    const t0 = performance.now();
    let rendered;
    try {
      rendered = await this.pool.render(lessonId, this.width, { background });
    } catch (err) {
      throw previewUnavailable(err, Math.ceil((this.settings.BOARD_RENDER_QUEUE_MS + this.settings.BOARD_RENDER_TIMEOUT_MS) / 1000));
    }
    if (!rendered) return null;
    const { seq, pageId, png, approximate } = rendered;
    const renderMs = Math.round(performance.now() - t0);
    const at = this.clock.now();
    // Two renderers may race (two nodes, or a node and the API): the newer seq wins.
    await this.sql`
      INSERT INTO board_previews (lesson_id, seq, page_id, png, render_ms, rendered_at)
      VALUES (${lessonId}, ${seq}, ${pageId}, ${png}, ${renderMs}, ${at})
      ON CONFLICT (lesson_id) DO UPDATE SET seq = EXCLUDED.seq, page_id = EXCLUDED.page_id, png = EXCLUDED.png,
        render_ms = EXCLUDED.render_ms, rendered_at = EXCLUDED.rendered_at
      WHERE board_previews.seq < EXCLUDED.seq`;
    return { png, seq, page_id: pageId, rendered_at: at, approximate };
  }
}
