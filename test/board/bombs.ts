import type { Sql } from '../../src/db/index.js';
import type { BoardElement } from '../../src/board/schema.js';

/**
 * Hostile pages for the bounded-rendering tests (docs/reliability.md,
 * "Attacks"): each element is valid by the element schema, and together they
 * cost the unbounded renderer minutes of CPU and gigabytes of memory.
 */
const style = { stroke: '#1e1e1e', fill: 'transparent', stroke_width: 2, stroke_style: 'solid', fill_style: 'solid', opacity: 100 } as const;
const z = (i: number) => `b${i.toString(36).padStart(5, '0')}`;

/** The attack: `count` text elements of 10,000 characters each, stacked on one page. */
export function textBomb(count: number, pageId = 'page-1'): BoardElement[] {
  const body = 'The quick brown fox jumps over the lazy dog. '.repeat(230).slice(0, 10_000);
  return Array.from({ length: count }, (_, i) => ({
    id: `tb${i}`, page_id: pageId, z: z(i), x: (i % 40) * 10, y: Math.floor(i / 40) * 10, angle: 0, style: { ...style }, locked: false,
    type: 'text', text: body, font_size: 20, font_family: 'sans', align: 'left', width: 100, height: 25,
  }) as BoardElement);
}

/** Large, filled, hatched, dashed, translucent rectangles covering the whole picture, `count` of them. */
export function paintBomb(count: number, pageId = 'page-1'): BoardElement[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `pb${i}`, page_id: pageId, z: z(i), x: 0, y: 0, angle: 0.3,
    style: { stroke: '#ff0000', fill: '#00ff00', stroke_width: 32, stroke_style: 'dashed', fill_style: 'cross-hatch', opacity: 50 }, locked: false,
    type: 'rectangle', width: 100_000, height: 100_000,
  }) as BoardElement);
}

/** Pen strokes of 4,000 points zig-zagging across the page, thin dotted lines, `count` of them. */
export function pointBomb(count: number, pageId = 'page-1'): BoardElement[] {
  const points = Array.from({ length: 4000 }, (_, k) => [(k % 2) * 50_000, k * 10] as [number, number]);
  return Array.from({ length: count }, (_, i) => ({
    id: `sb${i}`, page_id: pageId, z: z(i), x: i, y: 0, angle: 0,
    style: { ...style, stroke_width: 0.5, stroke_style: 'dotted' }, locked: false, type: 'freehand', points,
  }) as BoardElement);
}

/** Writes a page straight into the board tables: setting up 16 MB through the rules would take a minute. */
export async function plant(sql: Sql, lessonId: string, elements: BoardElement[], pages: { id: string; name: string }[] = [{ id: 'page-1', name: 'Page 1' }]): Promise<void> {
  await sql`
    INSERT INTO boards (lesson_id, seq, pages, live_elements, live_bytes, first_content_seq)
    VALUES (${lessonId}, 1, ${sql.json(pages)}, ${elements.length}, 0, 1)`;
  for (let i = 0; i < elements.length; i += 200) {
    const rows = elements.slice(i, i + 200).map((e) => ({ lesson_id: lessonId, element_id: e.id, page_id: e.page_id, z: e.z, data: sql.json(e as never), bytes: 0, deleted: false, updated_seq: 1 }));
    await sql`INSERT INTO board_elements ${sql(rows)}`;
  }
}
