import { describe, expect, it } from 'vitest';
import { RENDER_BUDGET } from '../../src/board/render/budget.js';
import { RenderBusy, RenderPool, type RenderLimits } from '../../src/board/render/pool.js';
import { renderPageSvg } from '../../src/board/render/svg.js';
import { apiError, startTestApi } from '../helpers/api.js';
import { lessonWithLinks } from '../realtime/helpers/fixtures.js';
import { paintBomb, plant, pointBomb, textBomb } from './bombs.js';
import { busyPage, rect, stroke, text } from './factories.js';

const api = await startTestApi({ env: { BOARD_RENDER_TIMEOUT_MS: '100' } });

/** Characters handed to resvg as glyphs. */
const glyphs = (svg: string) => [...svg.matchAll(/<tspan[^>]*>([^<]*)<\/tspan>/g)].reduce((a, m) => a + m[1].length, 0);
/** Path and polyline points handed to resvg. */
const points = (svg: string) => (svg.match(/[ML]-?\d/g) ?? []).length + [...svg.matchAll(/points="([^"]*)"/g)].reduce((a, m) => a + m[1].split(' ').length, 0);

describe('the render budget (RENDER_BUDGET)', () => {
  it('draws an ordinary busy page exactly', () => {
    const page = busyPage(2000);
    const out = renderPageSvg(page, { outputWidth: 800 });
    expect(out.approximate).toBe(false);
    expect((out.svg.match(/<g[ >]/g) ?? []).length).toBeGreaterThanOrEqual(2000);
    expect(glyphs(out.svg)).toBe(page.filter((e) => e.type === 'text').reduce((a, e) => a + (e as { text: string }).text.length, 0));
  });

  it('hands resvg at most the glyph budget however much text the page holds, greeking the rest', () => {
    const out = renderPageSvg([...textBomb(1614), text('big', 'Title', { x: 0, y: -200, font_size: 200 })], { outputWidth: 800 });
    expect(out.approximate).toBe(true);
    expect(glyphs(out.svg)).toBeLessThanOrEqual(RENDER_BUDGET.glyphs);
    expect(out.svg).toContain('>Title<'); // the topmost element is drawn first
    expect(out.svg.length).toBeLessThan(4_000_000);
  });

  it('clips a text to what can show inside the picture, whatever width the client declared', () => {
    const line = 'x'.repeat(10_000);
    const out = renderPageSvg([text('t', line, { font_size: 100, width: 10 })], { outputWidth: 800 });
    expect(out.approximate).toBe(true);
    expect(glyphs(out.svg)).toBeLessThan(200);
  });

  it('draws a stroke solid when its dashes would be finer than 3 px or more than 2,000', () => {
    const zigzag = Array.from({ length: 400 }, (_, k) => [(k % 2) * 500, k] as [number, number]);
    const dashed = { stroke: '#000000', fill: 'transparent', stroke_width: 2, stroke_style: 'dashed', fill_style: 'solid', opacity: 100 };
    const long = renderPageSvg([stroke('z', 2, { points: zigzag, style: dashed })], { outputWidth: 800 });
    expect(long.svg).toContain('<path'); // drawn, not left out
    expect(long.svg).not.toContain('stroke-dasharray');
    expect(long.approximate).toBe(true);
    const short = renderPageSvg([stroke('s', 2, { points: [[0, 0], [300, 0]], style: dashed })], { outputWidth: 800 });
    expect(short.svg).toContain('stroke-dasharray');
  });

  it('escapes text, so a participant cannot inject markup (an <image> reading a file) into the SVG', () => {
    const out = renderPageSvg([text('t', '</tspan></text><image href="file:///etc/passwd" width="9" height="9"/><text>&amp;', { font_size: 10 })], { outputWidth: 800 });
    expect(out.svg).not.toContain('<image');
    expect(out.svg).toContain('&lt;image href=&quot;file:///etc/passwd&quot;');
  });

  it('thins pen points to the point budget and leaves out what paints more than the paint budget', () => {
    const strokes = renderPageSvg(pointBomb(400), { outputWidth: 800 });
    expect(strokes.approximate).toBe(true);
    expect(points(strokes.svg)).toBeLessThanOrEqual(RENDER_BUDGET.points);
    expect(strokes.svg).not.toContain('stroke-dasharray'); // dots finer than a pixel are drawn solid
    const paint = renderPageSvg(paintBomb(20_000), { outputWidth: 800 });
    expect(paint.approximate).toBe(true);
    expect((paint.svg.match(/<rect /g) ?? []).length).toBeLessThanOrEqual(RENDER_BUDGET.paintCanvases + 1);
    expect(paint.svg).not.toContain(' opacity='); // no per-element layers
  });
});

describe('the render pool', () => {
  const limits = (o: Partial<RenderLimits> = {}): RenderLimits => ({ concurrency: 1, timeoutMs: 5000, memoryMb: 512, queueMs: 4000, databaseUrl: api.deps.config.DATABASE_URL, ...o });

  it('kills a render that passes its time limit; the preview read answers 503 unavailable with Retry-After', async () => {
    const f = await lessonWithLinks(api.deps.sql);
    await plant(api.deps.sql, f.lesson.id, textBomb(1614));
    const t0 = Date.now();
    const res = await api.request('GET', `/lessons/${f.lesson.id}/preview`, { key: f.apiKey });
    expect(res.status).toBe(503);
    expect(res.body).toEqual(apiError('unavailable', expect.stringContaining('within its limits (time)')));
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it('kills a render child whose resident memory passes the limit', async () => {
    const f = await lessonWithLinks(api.deps.sql);
    await plant(api.deps.sql, f.lesson.id, textBomb(400));
    const pool = new RenderPool(limits({ memoryMb: 64 }));
    try {
      await expect(pool.render(f.lesson.id, 800)).rejects.toMatchObject({ message: 'render used more than 64 MB', reason: 'memory' });
    } finally {
      pool.close();
    }
  });

  it('refuses a render that waited longer than its queue time, and serves reads before background renders', async () => {
    const [slow, a, b] = await Promise.all([lessonWithLinks(api.deps.sql), lessonWithLinks(api.deps.sql), lessonWithLinks(api.deps.sql)]);
    await plant(api.deps.sql, slow.lesson.id, textBomb(800));
    await plant(api.deps.sql, a.lesson.id, [rect('r')]);
    await plant(api.deps.sql, b.lesson.id, [rect('r')]);
    // Order and sharing, not speed: no queue or render time limit a loaded machine could reach
    // (the 4 s queue time was once passed beside two browser files, CI of stop 39).
    const pool = new RenderPool(limits({ queueMs: 120_000, timeoutMs: 120_000 }));
    try {
      await pool.render(a.lesson.id, 100); // the child is started and warm
      const order: string[] = [];
      const first = pool.render(slow.lesson.id, 800);
      const background = pool.render(a.lesson.id, 800, { background: true }).then(() => order.push('background'));
      const read = pool.render(b.lesson.id, 800).then(() => order.push('read'));
      // the same page while it waits: one render, shared
      expect(pool.render(b.lesson.id, 800)).toBe(pool.render(b.lesson.id, 800));
      await Promise.all([first, background, read]);
      expect(order).toEqual(['read', 'background']);
    } finally {
      pool.close();
    }
    const busy = new RenderPool(limits({ queueMs: 50, timeoutMs: 120_000 }));
    try {
      const running = busy.render(slow.lesson.id, 800);
      await expect(busy.render(a.lesson.id, 800)).rejects.toBeInstanceOf(RenderBusy);
      await running;
    } finally {
      busy.close();
    }
  }, 120_000);
});
