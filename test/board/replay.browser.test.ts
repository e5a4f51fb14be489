import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { issueReplayLink } from '../../src/domain/replay.js';
import { BoardStore, toSnapshot } from '../../src/board/store.js';
import { drawRect, drawStroke, showsExactly } from './actions.js';
import { ARTIFACTS, LAPTOP, startPageStack } from './browser.js';
import { MAGENTA, magentaPng, paste, pixelsOf } from './imagesPage.js';

/**
 * The replay page in Chromium against the real gateway: a lesson drawn by two people, screenshots
 * taken live at three moments, then the replay scrubbed to each moment shows the board as it was
 * (pixels compared with a tolerance: Excalidraw draws a shape's rough outline from a seed of its
 * own on every screen), and played at 16x it ends on the snapshot.
 */
const stack = await startPageStack();

/** The part of the board where the test draws, in board-canvas pixels. */
const REGION = { x: 280, y: 180, width: 520, height: 330 };

/**
 * A picture of the board's region: the editor's static canvas (the elements as drawn), without the
 * interactive layer above it (others' pointers, a selection), kept in test-artifacts.
 */
async function shotOf(page: Page, name: string): Promise<Buffer> {
  const url = await page.evaluate(({ x, y, width, height }) => {
    const c = document.querySelector<HTMLCanvasElement>('[data-testid=board] canvas.static')!;
    const k = c.width / c.clientWidth;
    const out = document.createElement('canvas');
    out.width = width;
    out.height = height;
    const g = out.getContext('2d')!;
    g.fillStyle = '#ffffff';
    g.fillRect(0, 0, width, height);
    g.drawImage(c, x * k, y * k, width * k, height * k, 0, 0, width, height);
    return out.toDataURL('image/png');
  }, REGION);
  const png = Buffer.from(url.slice(url.indexOf(',') + 1), 'base64');
  writeFileSync(path.join(ARTIFACTS, `${name}.png`), png);
  return png;
}

/**
 * Share of pixels that differ after both pictures are blurred (a rough line drawn with another
 * seed moves by a pixel or two; a missing or extra shape changes hundreds of pixels by far more).
 */
async function difference(a: Buffer, b: Buffer): Promise<number> {
  const raw = (png: Buffer) => sharp(png).resize(REGION.width, REGION.height).flatten({ background: '#ffffff' }).greyscale().blur(3).raw().toBuffer();
  const [x, y] = await Promise.all([raw(a), raw(b)]);
  let n = 0;
  for (let i = 0; i < x.length; i++) if (Math.abs(x[i] - y[i]) > 40) n++;
  return n / x.length;
}

const TOLERANCE = 0.01;

async function scrubTo(replay: Page, at: number): Promise<void> {
  const start = Number(await replay.locator('[data-testid=replay]').getAttribute('data-start'));
  await replay.locator('[data-testid=replay-scrub]').fill(String(at - start));
  await replay.waitForFunction(
    () => {
      const r = document.querySelector('[data-testid=replay]')!;
      return document.querySelector('[data-testid=board]')?.getAttribute('data-seq') === r.getAttribute('data-seq');
    },
    undefined,
    { timeout: 15_000 },
  );
  // the canvas is drawn on the next frames
  await replay.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

/**
 * The page shows the board at its last committed seq, drawn: a shape still being dragged is on the
 * others' screens before its last version is committed, and a picture taken then shows less than
 * the board had at that moment.
 */
async function atLastSeq(page: Page, lessonId: string): Promise<void> {
  const last = async () => (await stack.gw.deps.sql<{ seq: string }[]>`SELECT seq::text FROM boards WHERE lesson_id = ${lessonId}`)[0]?.seq;
  // the board's seq unchanged for half a second (the pen lifted, its last version committed), and the page at it
  let before: string | undefined;
  await expect
    .poll(
      async () => {
        const seq = await last();
        const steady = seq === before;
        before = seq;
        return steady && (await page.locator('[data-testid=board]').getAttribute('data-seq')) === seq;
      },
      { timeout: 15_000, intervals: [500] },
    )
    .toBe(true);
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

describe('replay page', () => {
  it('scrubbed to three moments shows the board as it was then, follows the page the history went to, and played at 16x ends on the snapshot', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const a = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'));
    const b = await stack.open(await l.url('s1', 'Boris', 'student'));
    // moment 1: the teacher's rectangle, as the student sees it
    await drawRect(a, [340, 240], [160, 100]);
    await a.keyboard.press('Escape');
    await showsExactly(b, 1);
    await atLastSeq(b, l.lessonId);
    const live1 = await shotOf(b, 'replay-live-1');
    const t1 = Date.now();
    // moment 2: the student's stroke next to it
    await drawStroke(b, [560, 300], 180, 12);
    await b.keyboard.press('Escape');
    await showsExactly(a, 2);
    await atLastSeq(b, l.lessonId);
    const live2 = await shotOf(b, 'replay-live-2');
    const t2 = Date.now();
    // moment 3: the teacher adds a page and draws there (the replay follows to it)
    await a.getByRole('button', { name: 'Add page' }).click();
    await a.locator('[data-testid=page-tab-1][aria-current=page]').waitFor();
    await drawRect(a, [420, 300], [220, 120]);
    await a.keyboard.press('Escape');
    await showsExactly(a, 1);
    // committed, and the teacher's screen at the board's last seq (their own screen shows the drawing before its commit)
    const onPage2 = async () => {
      const [r] = await stack.gw.deps.sql<{ n: number; seq: string }[]>`
        SELECT count(*) FILTER (WHERE op->>'type' = 'element.add' AND op->'elements'->0->>'page_id' <> 'page-1')::int AS n, max(seq)::text AS seq
        FROM board_history WHERE lesson_id = ${l.lessonId}`;
      return r.n > 0 && (await a.locator('[data-testid=board]').getAttribute('data-seq')) === r.seq;
    };
    await expect.poll(onPage2, { timeout: 15_000 }).toBe(true);
    const live3 = await shotOf(a, 'replay-live-3');
    const t3 = Date.now();

    const link = await issueReplayLink(stack.gw.deps.sql, { lesson: { id: l.lessonId } as never, ttlMinutes: 30, embedBaseUrl: stack.origin, at: new Date() });
    const sockets: string[] = [];
    const replay = await (await stack.browser().newContext(LAPTOP)).newPage();
    replay.on('websocket', (ws) => sockets.push(ws.url()));
    await replay.goto(link.url);
    await replay.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 60_000 });
    await replay.locator('[data-testid=replay-person]').nth(1).waitFor();

    // backwards and forwards: moment 2, then 1, then 3 (another page)
    const diffs: number[][] = [];
    for (const [i, at, live] of [[2, t2, live2], [1, t1, live1], [3, t3, live3]] as const) {
      await scrubTo(replay, at);
      const shot = await shotOf(replay, `replay-at-${i}`);
      diffs.push([await difference(shot, live1), await difference(shot, live2), await difference(shot, live3)]);
      const shownPage = await replay.locator('[data-testid=replay-page]').getAttribute('data-page');
      if (i === 3) expect(shownPage).not.toBe('page-1');
      else expect(shownPage).toBe('page-1');
    }
    // each moment matches its own live picture, and not the others' (the comparison tells them apart)
    const [at2, at1, at3] = diffs;
    expect(at1[0]).toBeLessThan(TOLERANCE);
    expect(at2[1]).toBeLessThan(TOLERANCE);
    expect(at3[2]).toBeLessThan(TOLERANCE);
    expect(Math.min(at1[1], at1[2], at2[0], at2[2], at3[0], at3[1])).toBeGreaterThan(TOLERANCE);

    // played from the start at 16x, it ends on the snapshot
    await replay.locator('[data-testid=replay-scrub]').fill('0');
    await replay.locator('[data-testid=replay-speed]').selectOption('16');
    await replay.locator('[data-testid=replay-play]').click();
    await replay.waitForFunction(() => {
      const r = document.querySelector('[data-testid=replay]')!;
      return r.getAttribute('data-t') === r.getAttribute('data-end');
    }, undefined, { timeout: 60_000 });
    await replay.locator('[data-testid=replay-play]', { hasText: 'Play' }).waitFor();
    const snap = toSnapshot(l.lessonId, await new BoardStore(stack.gw.deps.sql).read(l.lessonId));
    const page = await replay.locator('[data-testid=replay-page]').getAttribute('data-page');
    expect(Number(await replay.locator('[data-testid=board]').getAttribute('data-seq'))).toBe(snap.seq);
    const ids = ((await replay.locator('[data-testid=board]').getAttribute('data-ids')) ?? '').split(' ').filter(Boolean).sort();
    expect(ids).toEqual(snap.elements.filter((e) => e.page_id === page).map((e) => e.id).sort());
    expect(await difference(await shotOf(replay, 'replay-end'), live3)).toBeLessThan(TOLERANCE);
    await replay.screenshot({ path: path.join(ARTIFACTS, 'replay-page.png') });
    // the page never opened a socket: it reads over HTTP only
    expect(sockets).toEqual([]);
  }, 240_000);

  it("draws the board's images, fetched with the replay link", async () => {
    const l = await stack.lesson('board_only', 'generic');
    const a = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'));
    await paste(a, await magentaPng());
    await expect.poll(async () => (await stack.gw.deps.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM board_elements WHERE lesson_id = ${l.lessonId} AND NOT deleted AND data->>'status' = 'saved'`)[0].n, { timeout: 30_000 }).toBe(1);
    const link = await issueReplayLink(stack.gw.deps.sql, { lesson: { id: l.lessonId } as never, ttlMinutes: 30, embedBaseUrl: stack.origin, at: new Date() });
    const replay = await (await stack.browser().newContext(LAPTOP)).newPage();
    await replay.goto(link.url);
    await replay.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 60_000 });
    // at the end of the history the image is there, drawn from its file (the placeholder is grey)
    await scrubTo(replay, Number(await replay.locator('[data-testid=replay]').getAttribute('data-end')));
    await expect.poll(() => pixelsOf(replay, MAGENTA), { timeout: 20_000 }).toBeGreaterThan(1_000);
    await replay.screenshot({ path: path.join(ARTIFACTS, 'replay-image.png') });
  }, 120_000);
});
