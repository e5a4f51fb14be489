import { beforeAll, describe, expect, it } from 'vitest';
import { Resvg } from '@resvg/resvg-js';
import { SnapshotSchema } from '../../src/board/schema.js';
import { apiError, startTestApi } from '../helpers/api.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { busyPage, rect, stroke, text } from './factories.js';
import { startNode, until } from './helpers.js';

const api = await startTestApi();
const node = startNode();
const student = { role: 'student' as const };
const teacher = { role: 'teacher' as const };
let p: PartnerFixture;
beforeAll(async () => {
  p = await partnerFactory(api.deps.sql);
});

async function lesson(body: Record<string, unknown> = {}): Promise<string> {
  const res = await api.request('POST', '/lessons', { key: p.apiKey, body: { title: 'Board', ...body } });
  return res.body.id;
}

async function png(id: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${api.base}/api/partner/v1/lessons/${id}/preview`, { headers: { authorization: `Bearer ${p.apiKey}`, ...headers } });
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
}

describe('GET /lessons/{id}/snapshot', () => {
  it('answers the empty default board in our versioned format before anything is drawn', async () => {
    const id = await lesson();
    const res = await api.request('GET', `/lessons/${id}/snapshot`, { key: p.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      format: 'lesson-board',
      version: 1,
      lesson_id: id,
      seq: 0,
      updated_at: null,
      pinned_page_id: null,
      pages: [{ id: 'page-1', name: 'Page 1' }],
      elements: [],
      files: [],
    });
  });

  it('includes every acknowledged operation: pages in order, elements per page in stacking order', async () => {
    const id = await lesson();
    await node.board.submit(id, { type: 'page.add', page: { id: 'p0', name: 'Intro' }, after_page_id: null }, teacher);
    await node.board.submit(id, { type: 'page.reorder', page_ids: ['p0', 'page-1'] }, teacher);
    await node.board.submit(id, { type: 'element.add', elements: [rect('top', { z: 'a5' }), rect('bottom', { z: 'a1' }), text('intro', 'Hello', { page_id: 'p0' })] }, student);
    await node.board.submit(id, { type: 'element.add', elements: [stroke('pen', 5, { z: 'a3' })] }, student);
    const res = await api.request('GET', `/lessons/${id}/snapshot`, { key: p.apiKey });
    expect(res.status).toBe(200);
    expect(SnapshotSchema.parse(res.body)).toEqual(res.body);
    expect(res.body.seq).toBe(4);
    expect(res.body.pages.map((x: { id: string }) => x.id)).toEqual(['p0', 'page-1']);
    expect(res.body.elements.map((e: { id: string }) => e.id)).toEqual(['intro', 'bottom', 'pen', 'top']);
    expect(res.body.elements[1]).toEqual(rect('bottom', { z: 'a1' }));
  });

  it("answers 404 for another partner's lesson and 410 for an archived one, on both routes", async () => {
    const other = await partnerFactory(api.deps.sql);
    const theirs = (await api.request('POST', '/lessons', { key: other.apiKey, body: { title: 't' } })).body.id;
    await node.board.submit(theirs, { type: 'element.add', elements: [rect('a')] }, student);
    const archived = await lesson();
    await node.board.submit(archived, { type: 'element.add', elements: [rect('a')] }, student);
    await api.request('DELETE', `/lessons/${archived}`, { key: p.apiKey });
    for (const route of ['snapshot', 'preview']) {
      const nf = await api.request('GET', `/lessons/${theirs}/${route}`, { key: p.apiKey });
      expect(nf.status).toBe(404);
      expect(nf.body.detail.code).toBe('not_found');
      const gone = await api.request('GET', `/lessons/${archived}/${route}`, { key: p.apiKey });
      expect(gone.status).toBe(410);
      expect(gone.body).toEqual(apiError('archived'));
    }
  });
});

describe('GET /lessons/{id}/preview', () => {
  it('answers 404 no_preview before the board has any content', async () => {
    const id = await lesson();
    const res = await api.request('GET', `/lessons/${id}/preview`, { key: p.apiKey });
    expect(res.status).toBe(404);
    expect(res.body).toEqual(apiError('no_preview'));
    // a page added without drawing is still no content
    await node.board.submit(id, { type: 'page.add', page: { id: 'p2', name: 'Two' }, after_page_id: null }, teacher);
    expect((await api.request('GET', `/lessons/${id}/preview`, { key: p.apiKey })).status).toBe(404);
  });

  it('renders a PNG of the board on the server, current with the latest change, with an ETag that answers 304', async () => {
    const id = await lesson();
    await node.board.submit(id, { type: 'element.add', elements: [rect('r', { width: 300, height: 200, style: { ...rect('r').style, fill: '#ffc9c9' } })] }, student);
    const first = await png(id);
    expect(first.res.status).toBe(200);
    expect(first.res.headers.get('content-type')).toBe('image/png');
    expect(first.bytes.subarray(1, 4).toString()).toBe('PNG');
    expect(first.bytes.readUInt32BE(16)).toBe(800); // IHDR width = BOARD_PREVIEW_WIDTH
    expect(first.res.headers.get('etag')).toBe('"1"');
    const again = await png(id, { 'if-none-match': '"1"' });
    expect(again.res.status).toBe(304);

    await node.board.submit(id, { type: 'element.add', elements: [stroke('s', 30, { x: 400, y: 300 })] }, student);
    const changed = await png(id, { 'if-none-match': '"1"' });
    expect(changed.res.status).toBe(200);
    expect(changed.res.headers.get('etag')).toBe('"2"');
    expect(changed.bytes.equals(first.bytes)).toBe(false);
  });

  it('shows the pinned page, else the first page', async () => {
    const id = await lesson();
    await node.board.submit(id, { type: 'page.add', page: { id: 'p2', name: 'Two' }, after_page_id: null }, teacher);
    await node.board.submit(id, { type: 'element.add', elements: [rect('on1', { style: { ...rect('x').style, fill: '#ff0000' }, width: 400, height: 300 })] }, student);
    await node.board.submit(id, { type: 'element.add', elements: [rect('on2', { page_id: 'p2', style: { ...rect('x').style, fill: '#0000ff' }, width: 400, height: 300 })] }, student);
    const centre = (bytes: Buffer) => {
      const r = new Resvg(`<svg xmlns="http://www.w3.org/2000/svg" width="800" height="600"><image href="data:image/png;base64,${bytes.toString('base64')}" width="800" height="600"/></svg>`).render();
      const px = r.pixels;
      const i = (Math.floor(r.height / 2) * r.width + Math.floor(r.width / 2)) * 4;
      return [px[i], px[i + 1], px[i + 2]];
    };
    expect(centre((await png(id)).bytes)).toEqual([255, 0, 0]);
    await node.board.submit(id, { type: 'page.pin', page_id: 'p2' }, teacher);
    expect(centre((await png(id)).bytes)).toEqual([0, 0, 255]);
  });

  it('is refreshed by the gateway node a moment after drawing stops, so a read finds it ready', async () => {
    const quick = startNode({ previewDebounceMs: 50 });
    const id = await lesson();
    for (let i = 0; i < 200; i += 100) await quick.board.submit(id, { type: 'element.add', elements: busyPage(200).slice(i, i + 100) }, student);
    const deadline = Date.now() + 5000;
    let row: { seq: number }[] = [];
    while (Date.now() < deadline) {
      row = await api.deps.sql<{ seq: number }[]>`SELECT seq FROM board_previews WHERE lesson_id = ${id}`;
      if (row.length) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(row[0]?.seq).toBeGreaterThan(0);
    await quick.close();
  });

  it('is rendered in the background at most once per BOARD_PREVIEW_MIN_INTERVAL_MS per lesson, and still after the last change', async () => {
    const node = startNode({ previewDebounceMs: 30, previewMinIntervalMs: 1200 });
    const id = await lesson();
    const stored = async () =>
      (await api.deps.sql<{ seq: string; rendered_at: Date; render_ms: number }[]>`SELECT seq, rendered_at, render_ms FROM board_previews WHERE lesson_id = ${id}`)[0];
    const renderedSeq = async () => Number((await stored())?.seq ?? 0);
    // when a render began, from what it stored: it ends at rendered_at after render_ms
    const startedAt = (row: { rendered_at: Date; render_ms: number }) => row.rendered_at.getTime() - row.render_ms;
    await node.board.submit(id, { type: 'element.add', elements: [rect('a1')] }, student);
    await until(async () => (await renderedSeq()) === 1);
    const first = (await stored())!;
    await node.board.submit(id, { type: 'element.add', elements: [rect('a2')] }, student);
    await node.board.submit(id, { type: 'element.add', elements: [rect('a3')] }, student);
    // Every render stored until the one of seq 3: a render's row stays until the next render, which
    // under the rule is an interval later, so none is missed between two reads of the row.
    const renders = [first];
    await until(async () => {
      const row = (await stored())!;
      if (row.rendered_at.getTime() !== renders.at(-1)!.rendered_at.getTime()) renders.push(row);
      return Number(row.seq) === 3;
    }, 5000);
    // no second render within the interval: the interval runs between two renders' starts; what is
    // stored dates each start a little late (the read of the board before the render), so allow
    // 100 ms, far below the 1,200 ms without the rule
    for (let i = 1; i < renders.length; i++) expect(startedAt(renders[i]) - startedAt(renders[i - 1])).toBeGreaterThanOrEqual(1100);
    await node.close();
  });
});

describe('OpenAPI document', () => {
  it('describes the snapshot with our schema and the preview as a PNG with its error codes', async () => {
    const res = await api.request('GET', '/api/partner/v1/openapi.json');
    expect(res.status).toBe(200);
    const snap = res.body.paths['/lessons/{id}/snapshot'].get;
    expect(snap.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/BoardSnapshot' });
    expect(res.body.components.schemas.BoardSnapshot.properties.elements).toBeDefined();
    expect(res.body.components.schemas.BoardElement).toBeDefined();
    const preview = res.body.paths['/lessons/{id}/preview'].get;
    expect(Object.keys(preview.responses['200'].content)).toEqual(['image/png']);
    expect(preview.responses['404'].description).toMatch(/no_preview/);
    expect(preview.responses['410'].description).toMatch(/archived/);
  });
});

