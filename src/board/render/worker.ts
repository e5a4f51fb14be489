import { createSql, type Sql } from '../../db/index.js';
import type { ExportLimits, ExportOutcome } from './export.js';
import { readPreviewPage } from './page.js';
import { previewImages } from './images.js';
import { renderPagePng } from './png.js';

/**
 * The render child process (started by RenderPool, pool.ts): reads a
 * lesson's preview page (or, for an export, its whole board) from Postgres
 * and renders it, one at a time, as asked over the IPC channel. Reading here
 * too means a page of many megabytes costs the serving process nothing. It
 * exits when the parent goes away.
 */
export type RenderRequest = { id: number; kind: 'png'; lessonId: string; width: number } | { id: number; kind: 'pdf'; lessonId: string; limits: ExportLimits };

export type RenderReply =
  | { id: number; seq: number; pageId: string; png: Uint8Array; approximate: boolean }
  | { id: number; export: ExportOutcome }
  | { id: number; missing: true }
  | { id: number; error: string };

const url = process.env.RENDER_DATABASE_URL;
let sql: Sql | undefined;

process.on('message', (req: RenderRequest) => {
  void (async () => {
    let reply: RenderReply;
    try {
      sql ??= createSql(url!, { max: 1, name: 'lessons-render' });
      const page = req.kind === 'png' ? await readPreviewPage(sql, req.lessonId) : null;
      if (req.kind === 'pdf') {
        // pdfkit, svg-to-pdfkit and their fonts are loaded by a child's first export (once: children
        // live on), so a child that only renders previews starts as fast and stays as small as before
        const { exportBoard } = await import('./export.js');
        const out = await exportBoard(sql, req.lessonId, req.limits);
        reply = out ? { id: req.id, export: out } : { id: req.id, missing: true };
      } else if (!page) {
        reply = { id: req.id, missing: true };
      } else {
        const pictures = await previewImages(sql, req.lessonId, page.elements, req.width);
        const out = await renderPagePng(page.elements, req.width, pictures.images);
        reply = { id: req.id, seq: page.seq, pageId: page.pageId, png: out.png, approximate: out.approximate || !pictures.complete };
      }
    } catch (err) {
      reply = { id: req.id, error: (err as Error).message };
    }
    process.send!(reply);
  })();
});
process.on('disconnect', () => process.exit(0));
// loaded (modules, and fonts on the first render): the pool starts its render timer from here
process.send!({ ready: true });
