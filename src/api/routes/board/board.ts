import { BoardStore } from '../../../board/store.js';
import { PgFileStore } from '../../../board/files/store.js';
import { NotesExport, notesEtag, notesFileName } from '../../../board/notes.js';
import { PreviewService } from '../../../board/preview.js';
import { RateLimiter } from '../../../lib/rateLimiter.js';
import type { Deps } from '../../../deps.js';
import { getLiveLesson } from '../../../domain/lessons.js';
import { Errors } from '../../../errors.js';
import { BoardSnapshotSchema, presentSnapshot } from '../../presenters/board.js';
import { answerNotModified } from '../../conditional.js';
import { defineRoute, LessonIdParams } from '../../route.js';
import { z } from 'zod';

const tag = 'Board content';

/** One store and preview renderer per process (the renderer is single-flight per lesson). */
const services = new WeakMap<Deps, { store: BoardStore; previews: PreviewService; files: PgFileStore; notes: NotesExport; exports: RateLimiter }>();
function board(deps: Deps) {
  let s = services.get(deps);
  if (!s) {
    s = {
      store: new BoardStore(deps.sql),
      previews: new PreviewService(deps.sql, deps.clock, deps.config.BOARD_PREVIEW_WIDTH, deps.config),
      files: new PgFileStore(deps.sql, deps.readSql),
      notes: new NotesExport(deps.sql, deps.config),
      // an export holds a render slot for seconds: its own budget per key, inside the general one
      exports: new RateLimiter(deps.redis, deps.config.BOARD_EXPORT_PER_MINUTE, 60_000, { now: () => deps.clock.now().getTime() }),
    };
    services.set(deps, s);
  }
  return s;
}

export const boardRoutes = [
  defineRoute({
    method: 'get',
    path: '/lessons/{id}/snapshot',
    operationId: 'getSnapshot',
    tag,
    summary: "The board's pages and elements",
    description:
      'Our own versioned format (format "lesson-board", version 1; docs/snapshot-format.md). It includes every ' +
      'operation acknowledged to a participant (`seq` is the last one). A lesson nobody has drawn on yet has one empty page.',
    params: LessonIdParams,
    responses: {
      200: { description: 'Board snapshot', schema: BoardSnapshotSchema, headers: { ETag: 'W/"<format version>-<seq>": changes with every acknowledged operation' } },
      304: { description: 'Not modified (If-None-Match matched the current ETag)' },
    },
    errors: ['not_found', 'archived'],
    async handler(ctx, { params }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      const read = await board(deps).store.read(lesson.id);
      // read after the board: a file an element there names as saved was stored before that element
      const snapshot = presentSnapshot(lesson.id, read, await board(deps).files.list(deps.readSql, lesson.id));
      // seq names the board's state; weak, as the JSON may be sent compressed or not
      ctx.set('Cache-Control', 'private, no-cache');
      if (answerNotModified(ctx, `W/"${snapshot.version}-${snapshot.seq}"`)) return;
      ctx.body = snapshot;
    },
  }),
  defineRoute({
    method: 'get',
    path: '/lessons/{id}/preview',
    operationId: 'getPreview',
    tag,
    summary: 'A PNG thumbnail of the board (the pinned page, else the first)',
    description:
      'Rendered on the server from the board state; never older than the board (a stale picture is rendered again on read). ' +
      '404 no_preview until something has been drawn. ETag is the board seq shown; If-None-Match (RFC 9110: a list, weak comparison, `*`) answers 304. ' +
      'A render is bounded: a page beyond its drawing budget gives an approximate picture; when the renderer is busy or a ' +
      'render passes its time or memory limit, 503 unavailable with Retry-After, within 10 s.',
    ownDeadline: true,
    params: LessonIdParams,
    responses: {
      200: { description: 'PNG image', contentType: 'image/png', headers: { ETag: 'board seq the picture shows' } },
      304: { description: 'Not modified (If-None-Match matched)' },
    },
    errors: ['not_found', 'archived', 'no_preview', 'unavailable'],
    async handler(ctx, { params }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      const preview = await board(deps).previews.get(lesson.id);
      if (!preview) throw Errors.noPreview();
      ctx.set('Cache-Control', 'private, no-cache');
      ctx.set('Last-Modified', preview.rendered_at.toUTCString());
      if (answerNotModified(ctx, `"${preview.seq}"`)) return;
      ctx.type = 'image/png';
      ctx.body = preview.png;
    },
  }),
  defineRoute({
    method: 'get',
    path: '/lessons/{id}/export.pdf',
    operationId: 'exportPdf',
    tag,
    summary: "The board's notes as a PDF: one page per board page",
    description:
      "Every page of the board in the board's order, each framed to its content as the preview is (a stray mark far from " +
      'the rest does not shrink the page); text elements are real text (selectable, searchable), formulas and vectors are ' +
      'typeset, shapes and strokes are vectors, each image file is embedded once. Rendered on the server from the board ' +
      'as it is now (docs/board.md, "Notes as a PDF"). ETag names the board state (`W/"pdf1-<seq>"`); If-None-Match ' +
      'answers 304 without rendering. 404 board_empty when the board has nothing on it; 422 export_too_large past the ' +
      'export limits; 503 unavailable with Retry-After when the renderer is busy or the export passes its time or memory ' +
      'limit. At most BOARD_EXPORT_PER_MINUTE exports a minute per API key (429).',
    ownDeadline: true,
    params: LessonIdParams,
    responses: {
      200: { description: 'PDF document', contentType: 'application/pdf', headers: { ETag: 'W/"pdf1-<seq>": the board state the PDF shows' } },
      304: { description: 'Not modified (If-None-Match matched)' },
    },
    errors: ['not_found', 'archived', 'board_empty', 'export_too_large', 'rate_limited', 'unavailable'],
    async handler(ctx, { params }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      const { notes, exports } = board(deps);
      const { seq } = await notes.head(lesson.id);
      ctx.set('Cache-Control', 'private, no-cache');
      if (answerNotModified(ctx, notesEtag(seq))) return;
      const rate = await exports.take(`export:${auth.keyId}`);
      if (!rate.allowed) throw Errors.rateLimited(rate.retryAfterMs);
      const out = await notes.get(lesson.id);
      ctx.set('ETag', notesEtag(out.seq));
      ctx.set('Content-Disposition', `attachment; filename="${notesFileName(lesson.id)}"`);
      ctx.type = 'application/pdf';
      ctx.body = out.pdf;
    },
  }),
  defineRoute({
    method: 'get',
    path: '/lessons/{id}/files/{file_id}',
    tag,
    operationId: 'getFile',
    summary: 'The bytes of a file of the board (an image, a PDF page)',
    description:
      "A file the snapshot lists (`files`; image elements name it by `file_id`): the bytes participants uploaded, as the " +
      'gateway kept them after checking and re-encoding (PNG, JPEG or WebP, no metadata). Content-addressed: `file_id` is ' +
      'the hex sha-256 of the bytes, so they never change; ETag is the file id and If-None-Match answers 304.',
    params: LessonIdParams.extend({ file_id: z.string().regex(/^[0-9a-f]{64}$/) }),
    responses: {
      200: { description: 'The file (image/png, image/jpeg or image/webp)', contentType: 'image/*', headers: { ETag: '"<file_id>"' } },
      304: { description: 'Not modified (If-None-Match matched)' },
    },
    errors: ['not_found', 'archived'],
    async handler(ctx, { params }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      const file = await board(deps).files.get(lesson.id, params.file_id);
      if (!file) throw Errors.notFound('File');
      ctx.set('Cache-Control', 'private, max-age=31536000, immutable');
      ctx.set('X-Content-Type-Options', 'nosniff');
      if (answerNotModified(ctx, `"${file.id}"`)) return;
      ctx.type = file.type;
      ctx.body = file.data;
    },
  }),
];
