import type { Sql } from '../../db/index.js';
import type { BoardElement } from '../schema.js';

/**
 * The pictures of a preview page's images, for the render child (worker.ts):
 * each saved image's file, read from Postgres and scaled by sharp to at most
 * the preview's width, as a data: URL resvg draws. Bounded like the rest of a
 * render: at most PREVIEW_IMAGES files and PREVIEW_IMAGE_BYTES of them are
 * read (the topmost images first; the others are drawn as placeholders and the
 * picture is marked approximate), each decoded with the server's pixel limit,
 * all inside the child whose time and memory the pool limits.
 */
export const PREVIEW_IMAGES = 24;
export const PREVIEW_IMAGE_BYTES = 48 * 1024 * 1024;
const MAX_PIXELS = 40_000_000;

export async function previewImages(
  sql: Sql,
  lessonId: string,
  elements: BoardElement[],
  width: number,
  bounds: { files: number; bytes: number } = { files: PREVIEW_IMAGES, bytes: PREVIEW_IMAGE_BYTES },
): Promise<{ images: Map<string, string>; complete: boolean }> {
  const wanted: string[] = [];
  for (let i = elements.length - 1; i >= 0; i--) {
    const el = elements[i];
    if (el.type === 'image' && el.status === 'saved' && !wanted.includes(el.file_id)) wanted.push(el.file_id);
  }
  const images = new Map<string, string>();
  if (!wanted.length) return { images, complete: true };
  const ids = wanted.slice(0, bounds.files);
  const sizes = await sql<{ file_id: string; bytes: number }[]>`
    SELECT file_id, bytes FROM lesson_files WHERE lesson_id = ${lessonId} AND file_id = ANY(${ids}::text[])`;
  const bytesOf = new Map(sizes.map((r) => [r.file_id, r.bytes]));
  let total = 0;
  const take: string[] = [];
  for (const id of ids) {
    const b = bytesOf.get(id);
    if (b === undefined || total + b > bounds.bytes) continue;
    total += b;
    take.push(id);
  }
  let complete = take.length === wanted.length;
  const side = Math.max(64, Math.min(2048, width));
  // libvips is loaded by a child's first page with images (once: children live on), so a child that
  // draws none keeps its memory for the render limit
  const { default: sharp } = await import('sharp');
  for (const id of take) {
    const [row] = await sql<{ data: Buffer }[]>`SELECT data FROM lesson_files WHERE lesson_id = ${lessonId} AND file_id = ${id}`;
    if (!row?.data) {
      complete = false;
      continue;
    }
    try {
      const jpeg = await sharp(row.data, { limitInputPixels: MAX_PIXELS, failOn: 'error' })
        .resize(side, side, { fit: 'inside', withoutEnlargement: true })
        .flatten({ background: '#ffffff' })
        .jpeg({ quality: 80 })
        .toBuffer();
      images.set(id, `data:image/jpeg;base64,${jpeg.toString('base64')}`);
    } catch {
      complete = false;
    }
  }
  return { images, complete };
}
