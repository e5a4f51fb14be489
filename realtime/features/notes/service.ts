import { ifNoneMatchMatches } from '../../../src/api/conditional.js';
import { NotesExport, notesEtag, notesFileName } from '../../../src/board/notes.js';
import type { Deps } from '../../../src/deps.js';
import { AppError, errorBody } from '../../../src/errors.js';
import { RateLimiter } from '../../../src/lib/rateLimiter.js';
import type { LinkCheck } from '../../admission/Admission.js';
import { personIdOf } from '../../admission/personId.js';
import type { HttpReply } from '../api.js';
import { errorReply, participantOf } from '../files/service.js';
import { FileError } from '../../../src/board/files/errors.js';

export interface NotesRequest {
  lessonId: string;
  headers: Record<string, string>;
}

/**
 * "Download notes (PDF)" of the participant page: `GET /notes/<lesson>` with
 * the link token in `Authorization: Bearer`, checked as for files (unknown or
 * expired 401, archived 410, removed 403, another lesson's 403). The document
 * is the partner API's `export.pdf` (src/board/notes.ts: the same renderer in
 * the same bounded render pool), for teachers and students alike
 * (docs/board.md, "Notes as a PDF"). Errors are the API's body
 * `{"detail": {"code", "message"}}`: 404 board_empty, 422 export_too_large,
 * 429 rate_limited (BOARD_EXPORT_PER_MINUTE per person), 503 unavailable.
 */
export class NotesService {
  private readonly notes: NotesExport;
  private readonly rates: RateLimiter;

  constructor(
    private readonly deps: Deps,
    private readonly checkLink: (token: string | undefined) => Promise<LinkCheck>,
  ) {
    this.notes = new NotesExport(deps.sql, deps.config);
    this.rates = new RateLimiter(deps.redis, deps.config.BOARD_EXPORT_PER_MINUTE, 60_000, { now: () => deps.clock.now().getTime() });
  }

  async serve(req: NotesRequest, head: boolean): Promise<HttpReply> {
    try {
      const link = await participantOf(this.checkLink, req.lessonId, req.headers);
      const { seq } = await this.notes.head(req.lessonId);
      const headers = { etag: notesEtag(seq), 'cache-control': 'private, no-cache', vary: 'authorization', 'x-content-type-options': 'nosniff' };
      if (ifNoneMatchMatches(req.headers['if-none-match'] ?? '', headers.etag)) return { status: 304, headers, body: '' };
      if (head) return { status: 200, headers: { ...headers, 'content-type': 'application/pdf' }, body: '' };
      const rate = await this.rates.take(`notes:${req.lessonId}:${personIdOf(link)}`);
      if (!rate.allowed) return appError(new AppError(429, 'rate_limited', 'Too many downloads: try again in a moment', undefined, { 'retry-after': String(Math.max(1, Math.ceil(rate.retryAfterMs / 1000))) }));
      const out = await this.notes.get(req.lessonId);
      return {
        status: 200,
        headers: { ...headers, etag: notesEtag(out.seq), 'content-type': 'application/pdf', 'content-disposition': `attachment; filename="${notesFileName(req.lessonId)}"` },
        body: out.pdf,
      };
    } catch (err) {
      if (err instanceof FileError) return errorReply(err);
      if (err instanceof AppError) return appError(err);
      this.deps.log.warn({ component: 'notes', err: (err as Error).message }, 'notes download failed');
      return appError(new AppError(503, 'unavailable', 'The notes could not be made: try again in a moment', undefined, { 'retry-after': '5' }));
    }
  }
}

function appError(e: AppError): HttpReply {
  const extra = Object.fromEntries(Object.entries(e.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  return { status: e.status, headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...extra }, body: JSON.stringify(errorBody(e)) };
}
