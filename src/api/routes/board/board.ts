import { BoardStore } from '../../../board/store.js';
import { PreviewService } from '../../../board/preview.js';
import type { Deps } from '../../../deps.js';
import { getLiveLesson } from '../../../domain/lessons.js';
import { Errors } from '../../../errors.js';
import { BoardSnapshotSchema, presentSnapshot } from '../../presenters/board.js';
import { answerNotModified } from '../../conditional.js';
import { defineRoute, LessonIdParams } from '../../route.js';

const tag = 'Board content';

/** One store and preview renderer per process (the renderer is single-flight per lesson). */
const services = new WeakMap<Deps, { store: BoardStore; previews: PreviewService }>();
function board(deps: Deps) {
  let s = services.get(deps);
  if (!s) {
    s = { store: new BoardStore(deps.sql), previews: new PreviewService(deps.sql, deps.clock, deps.config.BOARD_PREVIEW_WIDTH, deps.config) };
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
      const snapshot = presentSnapshot(lesson.id, await board(deps).store.read(lesson.id));
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
];
