import { loadavg } from 'node:os';
import { beforeAll, describe, expect, it } from 'vitest';
import sharp from 'sharp';
import { checkImage } from '../../src/board/files/check.js';
import { PgFileStore } from '../../src/board/files/store.js';
import type { BoardElement } from '../../src/board/schema.js';
import type { Sql } from '../../src/db/index.js';
import { startTestApi } from '../helpers/api.js';
import { childrenRssMb } from '../helpers/rss.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { plant } from './bombs.js';
import { busyPage, image, rect, stroke, text } from './factories.js';
import { parsePdf } from './pdf.js';
import { startNode } from './helpers.js';

const api = await startTestApi();
// small limits, so that a board over them is cheap to build
const tight = await startTestApi({ env: { BOARD_EXPORT_MAX_ELEMENTS: '2000', BOARD_EXPORT_PER_MINUTE: '3' } });
const slow = await startTestApi({ env: { BOARD_EXPORT_TIMEOUT_MS: '1000' } });
// a pool of its own (other render limits): its child passes 64 MB as soon as it loads pdfkit
const small = await startTestApi({ env: { BOARD_RENDER_MEMORY_MB: '64' } });
const node = startNode();
let p: PartnerFixture;
beforeAll(async () => {
  p = await partnerFactory(api.deps.sql);
});

async function lesson(): Promise<string> {
  return (await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Notes' } })).body.id;
}

/** A board written straight to Postgres: pages in this order, each with its elements. */
const plantPages = (sql: Sql, lessonId: string, pages: { id: string; name: string; elements: BoardElement[] }[]) =>
  plant(sql, lessonId, pages.flatMap((pg) => pg.elements.map((e) => ({ ...e, page_id: pg.id }) as BoardElement)), pages.map(({ id, name }) => ({ id, name })));

async function exportPdf(base: string, id: string, key: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}/api/partner/v1/lessons/${id}/export.pdf`, { headers: { authorization: `Bearer ${key}`, ...headers } });
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
}

const formula = (id: string, latex: string, o: Record<string, unknown> = {}) =>
  ({ ...rect(id), type: 'formula', latex, font_size: 24, width: 260, height: 60, ...o }) as BoardElement;

describe('GET /lessons/{id}/export.pdf', () => {
  it('gives one page per board page in the board order, with the text as text, formulas typeset and each image file embedded once', async () => {
    const id = await lesson();
    const photo = await checkImage(await sharp({ create: { width: 64, height: 48, channels: 3, background: '#2b8a3e' } }).png().toBuffer(), { maxPixels: 1e6 });
    await new PgFileStore(api.deps.sql).put(id, photo, 'p1', { maxBytes: 1e7, maxFiles: 10 });
    await plantPages(api.deps.sql, id, [
      { id: 'intro', name: 'Intro', elements: [text('t1', 'Photosynthesis notes', { z: 'a1' }), image('i1', photo.id, { z: 'a2' }), image('i2', photo.id, { x: 300, z: 'a3' })] },
      { id: 'page-1', name: 'Page 1', elements: [formula('f1', 'x = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}'), text('t2', 'Квадратное уравнение', { y: 200, z: 'a4' }), image('i3', photo.id, { y: 300, z: 'a5' })] },
      { id: 'blank', name: 'Blank', elements: [] },
    ]);
    const { res, bytes } = await exportPdf(api.base, id, p.apiKey);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/pdf');
    expect(res.headers.get('etag')).toBe('W/"pdf1-1"');
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="notes-${id}.pdf"`);
    const pdf = await parsePdf(bytes);
    expect(pdf.pages.map((pg) => pg.text)).toEqual(['Photosynthesis notes', 'Квадратное уравнение', '']);
    expect(pdf.pages.map((pg) => pg.images)).toEqual([2, 1, 0]);
    // one picture in the file however many times the board shows it
    expect(pdf.imageObjects).toBe(1);
    // the formula is drawn (paths), not its source
    expect(pdf.pages[1].paths).toBeGreaterThan(10);
    expect(pdf.pages[1].text).not.toContain('frac');
    expect(pdf.outline).toEqual(['Intro', 'Page 1', 'Blank']);
  });

  it('frames each page on its content: a stray stroke far away does not shrink the page', async () => {
    const id = await lesson();
    const content = busyPage(40, 'page-1');
    await plantPages(api.deps.sql, id, [
      { id: 'page-1', name: 'Page 1', elements: [...content, stroke('stray', 5, { x: 60_000, y: 40_000, z: 'zz' })] },
      { id: 'page-2', name: 'Page 2', elements: content.map((e) => ({ ...e, id: `${e.id}-2` })) },
    ]);
    const pdf = await parsePdf((await exportPdf(api.base, id, p.apiKey)).bytes);
    // both pages the same size: the stray stroke left out of the frame
    expect(pdf.pages[0].size).toEqual(pdf.pages[1].size);
    expect(pdf.pages[0].size[0]).toBeLessThan(2000);
  });

  it('answers 304 to If-None-Match while the board is unchanged, without rendering, and a new PDF once it changes', async () => {
    const id = await lesson();
    await node.board.submit(id, { type: 'element.add', elements: [text('t', 'First')] }, { role: 'teacher' });
    const first = await exportPdf(api.base, id, p.apiKey);
    const etag = first.res.headers.get('etag')!;
    const same = await exportPdf(api.base, id, p.apiKey, { 'if-none-match': etag });
    expect(same.res.status).toBe(304);
    expect(same.res.headers.get('etag')).toBe(etag);
    await node.board.submit(id, { type: 'element.add', elements: [text('t2', 'Second', { y: 200 })] }, { role: 'teacher' });
    const changed = await exportPdf(api.base, id, p.apiKey, { 'if-none-match': etag });
    expect(changed.res.status).toBe(200);
    expect(changed.res.headers.get('etag')).not.toBe(etag);
    expect((await parsePdf(changed.bytes)).pages[0].text).toBe('First Second');
  });

  it('answers 404 board_empty for a board with nothing on it, 404 for another partner\'s lesson and 410 for an archived one', async () => {
    const never = await lesson();
    const cleared = await lesson();
    await node.board.submit(cleared, { type: 'element.add', elements: [rect('r')] }, { role: 'teacher' });
    await node.board.submit(cleared, { type: 'element.delete', elements: [{ id: 'r', version: 2, version_nonce: 0 }] }, { role: 'teacher' });
    for (const id of [never, cleared]) {
      const res = await api.request('GET', `/lessons/${id}/export.pdf`, { key: p.apiKey });
      expect(res.status).toBe(404);
      expect(res.body.detail.code).toBe('board_empty');
    }
    const other = await partnerFactory(api.deps.sql);
    const theirs = (await api.request('POST', '/lessons', { key: other.apiKey, body: { title: 't' } })).body.id;
    await node.board.submit(theirs, { type: 'element.add', elements: [rect('a')] }, { role: 'teacher' });
    expect((await api.request('GET', `/lessons/${theirs}/export.pdf`, { key: p.apiKey })).body.detail.code).toBe('not_found');
    const archived = await lesson();
    await node.board.submit(archived, { type: 'element.add', elements: [rect('a')] }, { role: 'teacher' });
    await api.request('DELETE', `/lessons/${archived}`, { key: p.apiKey });
    const gone = await api.request('GET', `/lessons/${archived}/export.pdf`, { key: p.apiKey });
    expect(gone.status).toBe(410);
    expect(gone.body.detail.code).toBe('archived');
  });

  it('exports a board at the element limit within the time and memory limits, and refuses one past it with export_too_large', { timeout: 120_000 }, async () => {
    const tp = await partnerFactory(tight.deps.sql);
    const make = async (count: number) => {
      const id = (await tight.request('POST', '/lessons', { key: tp.apiKey, body: { title: 'Big' } })).body.id;
      const per = count / 4;
      await plantPages(tight.deps.sql, id, [0, 1, 2, 3].map((i) => ({ id: `p${i}`, name: `P${i}`, elements: busyPage(per, `p${i}`).map((e) => ({ ...e, id: `${e.id}-${i}` })) })));
      return id;
    };
    const atLimit = await make(2000);
    const over = await make(2004);
    // the render children's resident memory, sampled while the export runs
    let peak = 0;
    const sample = setInterval(() => (peak = Math.max(peak, childrenRssMb('render/worker'))), 20);
    const t0 = performance.now();
    const ok = await exportPdf(tight.base, atLimit, tp.apiKey);
    const ms = performance.now() - t0;
    clearInterval(sample);
    expect(ok.res.status).toBe(200);
    expect((await parsePdf(ok.bytes)).pages).toHaveLength(4);
    const cfg = tight.deps.config;
    expect(ms).toBeLessThan(cfg.BOARD_EXPORT_TIMEOUT_MS + cfg.BOARD_RENDER_QUEUE_MS);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThan(cfg.BOARD_RENDER_MEMORY_MB);
    console.log(`export at the limit (load ${loadavg()[0].toFixed(1)}): 2,000 elements on 4 pages in ${Math.round(ms)} ms, render child peak RSS ${Math.round(peak)} MB, ${ok.bytes.length} bytes`);
    const refused = await tight.request('GET', `/lessons/${over}/export.pdf`, { key: tp.apiKey });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toEqual({ code: 'export_too_large', message: expect.stringContaining('at most 2000') });
  });

  it('stops an export that passes its time limit with 503 unavailable and Retry-After, and the renderer serves the next', { timeout: 120_000 }, async () => {
    const sp = await partnerFactory(slow.deps.sql);
    const id = (await slow.request('POST', '/lessons', { key: sp.apiKey, body: { title: 'Slow' } })).body.id;
    await plantPages(slow.deps.sql, id, Array.from({ length: 10 }, (_, i) => ({ id: `p${i}`, name: `P${i}`, elements: busyPage(1000, `p${i}`).map((e) => ({ ...e, id: `${e.id}-${i}` })) })));
    const res = await slow.request('GET', `/lessons/${id}/export.pdf`, { key: sp.apiKey });
    expect(res.status).toBe(503);
    expect(res.body.detail).toEqual({ code: 'unavailable', message: expect.stringContaining('(time)') });
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    // the same render pool (one per process and render limits), with a fresh child, under the usual time limit
    const small = await lesson();
    await plantPages(api.deps.sql, small, [{ id: 'page-1', name: 'Page 1', elements: [text('t', 'Still here')] }]);
    const next = await exportPdf(api.base, small, p.apiKey);
    expect([next.res.status, next.res.status === 200 ? '' : next.bytes.toString()]).toEqual([200, '']);
  });

  it('stops an export whose render child passes the memory limit with 503 unavailable', { timeout: 120_000 }, async () => {
    const mp = await partnerFactory(small.deps.sql);
    const id = (await small.request('POST', '/lessons', { key: mp.apiKey, body: { title: 'Memory' } })).body.id;
    await plantPages(small.deps.sql, id, [{ id: 'page-1', name: 'Page 1', elements: busyPage(500) }]);
    const res = await small.request('GET', `/lessons/${id}/export.pdf`, { key: mp.apiKey });
    expect(res.status).toBe(503);
    expect(res.body.detail).toEqual({ code: 'unavailable', message: expect.stringContaining('(memory)') });
  });

  it('limits exports per API key: past BOARD_EXPORT_PER_MINUTE a minute, 429 with Retry-After', async () => {
    const tp = await partnerFactory(tight.deps.sql);
    const id = (await tight.request('POST', '/lessons', { key: tp.apiKey, body: { title: 'Rate' } })).body.id;
    await plantPages(tight.deps.sql, id, [{ id: 'page-1', name: 'Page 1', elements: [text('t', 'x')] }]);
    for (let i = 0; i < 3; i++) expect((await exportPdf(tight.base, id, tp.apiKey)).res.status).toBe(200);
    const limited = await tight.request('GET', `/lessons/${id}/export.pdf`, { key: tp.apiKey });
    expect(limited.status).toBe(429);
    expect(limited.body.detail.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});

