import type { Config } from '../config.js';
import type { Sql } from '../db/index.js';
import { Errors } from '../errors.js';
import type { ExportLimits } from './render/export.js';
import type { ExportResult } from './render/pool.js';
import { previewUnavailable, renderPool, type RenderSettings } from './preview.js';

export type ExportSettings = RenderSettings &
  Pick<Config, 'BOARD_EXPORT_TIMEOUT_MS' | 'BOARD_EXPORT_MAX_ELEMENTS' | 'BOARD_EXPORT_MAX_IMAGE_BYTES' | 'BOARD_EXPORT_MAX_PDF_BYTES'>;

export interface Notes {
  /** board seq the PDF shows */
  seq: number;
  pdf: Buffer;
}

/** The ETag of the notes of board state `seq`: weak, as two renders of one state may differ in their bytes (creation date). */
export const notesEtag = (seq: number): string => `W/"pdf1-${seq}"`;

/** The file name a download of the notes gets (lesson ids are of safe characters). */
export const notesFileName = (lessonId: string): string => `notes-${lessonId}.pdf`;

/**
 * Exports kept per process, by lesson (shared by the API and the gateway of one process): the class
 * downloading its notes at the end of a lesson costs one render. Least recently stored out first.
 */
const CACHE_BYTES = 64 * 1024 * 1024;
const kept = { notes: new Map<string, Notes>(), bytes: 0 };

/**
 * The board as a PDF, for the partner API (`GET /lessons/{id}/export.pdf`) and
 * the participant page (the gateway's `GET /notes/<lesson>`): one renderer,
 * the process's bounded RenderPool (render/export.ts runs in its child).
 * `head` answers what a conditional request needs without rendering; `get`
 * renders (single-flight per lesson, the last export of each lesson kept while
 * its board has not moved on). Errors are AppErrors: 404 `board_empty`, 422
 * `export_too_large`, 503 `unavailable` (docs/board.md, "Notes as a PDF").
 */
export class NotesExport {
  private readonly inflight = new Map<string, Promise<Notes>>();
  readonly limits: ExportLimits;

  constructor(
    private readonly sql: Sql,
    private readonly settings: ExportSettings,
  ) {
    this.limits = {
      timeoutMs: settings.BOARD_EXPORT_TIMEOUT_MS,
      elements: settings.BOARD_EXPORT_MAX_ELEMENTS,
      imageBytes: settings.BOARD_EXPORT_MAX_IMAGE_BYTES,
      pdfBytes: settings.BOARD_EXPORT_MAX_PDF_BYTES,
    };
  }

  /** The board's seq, checked for content and size (throws board_empty, export_too_large). */
  async head(lessonId: string): Promise<{ seq: number }> {
    const [b] = await this.sql<{ seq: number; live_elements: number }[]>`SELECT seq, live_elements FROM boards WHERE lesson_id = ${lessonId}`;
    if (!b || b.live_elements === 0) throw Errors.boardEmpty();
    if (b.live_elements > this.limits.elements) throw Errors.exportTooLarge(`the board has ${b.live_elements} elements; an export takes at most ${this.limits.elements}`);
    return { seq: b.seq };
  }

  /** The notes as the board is now. */
  async get(lessonId: string): Promise<Notes> {
    const { seq } = await this.head(lessonId);
    const hit = kept.notes.get(lessonId);
    if (hit && hit.seq >= seq) return hit;
    let running = this.inflight.get(lessonId);
    if (!running) {
      running = this.render(lessonId).finally(() => this.inflight.delete(lessonId));
      this.inflight.set(lessonId, running);
    }
    return running;
  }

  private async render(lessonId: string): Promise<Notes> {
    let out: ExportResult | null;
    try {
      out = await renderPool(this.settings).exportPdf(lessonId, this.limits);
    } catch (err) {
      throw previewUnavailable(err, Math.ceil((this.settings.BOARD_RENDER_QUEUE_MS + this.limits.timeoutMs) / 1000), 'export');
    }
    if (!out || out.kind === 'empty') throw Errors.boardEmpty();
    if (out.kind === 'too_large') throw Errors.exportTooLarge(out.reason);
    const notes = { seq: out.seq, pdf: out.pdf };
    this.keep(lessonId, notes);
    return notes;
  }

  private keep(lessonId: string, notes: Notes): void {
    if (notes.pdf.length > CACHE_BYTES / 4) return;
    const old = kept.notes.get(lessonId);
    if (old) {
      kept.notes.delete(lessonId);
      kept.bytes -= old.pdf.length;
    }
    kept.notes.set(lessonId, notes);
    kept.bytes += notes.pdf.length;
    for (const [id, n] of kept.notes) {
      if (kept.bytes <= CACHE_BYTES) break;
      kept.notes.delete(id);
      kept.bytes -= n.pdf.length;
    }
  }
}
