import type { Sql } from '../../db/index.js';
import type { BoardHead } from '../apply.js';
import type { BoardElement } from '../schema.js';

/** The page a preview shows: the pinned page, else the first. */
export function previewPageId(head: Pick<BoardHead, 'pages' | 'pinned_page_id'>): string {
  return head.pinned_page_id ?? head.pages[0].id;
}

export interface PreviewPage {
  /** board seq the elements are the state of */
  seq: number;
  pageId: string;
  /** in stacking order */
  elements: BoardElement[];
}

/**
 * The preview page of a lesson's board, head and elements from one snapshot
 * so the picture is exactly board state `seq`. Read by the render child
 * (worker.ts), so that a page of many megabytes is fetched and parsed there,
 * never on the serving process's event loop.
 */
export async function readPreviewPage(sql: Sql, lessonId: string): Promise<PreviewPage | null> {
  return sql.begin('isolation level repeatable read read only', async (tx) => {
    const [head] = await tx<(Pick<BoardHead, 'pages' | 'pinned_page_id'> & { seq: number })[]>`
      SELECT seq, pages, pinned_page_id FROM boards WHERE lesson_id = ${lessonId}`;
    if (!head) return null;
    const pageId = previewPageId(head);
    const els = await tx<{ data: BoardElement }[]>`
      SELECT data FROM board_elements WHERE lesson_id = ${lessonId} AND page_id = ${pageId} AND NOT deleted
      ORDER BY z, element_id`;
    return { seq: head.seq, pageId, elements: els.map((e) => e.data) };
  });
}
