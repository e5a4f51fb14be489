/**
 * `npm run bench:board:stroke`: what one long freehand stroke costs on the
 * wire (issue 12, point 3; docs/benchmarks.md, "Board: a 400-point stroke").
 * A real gateway process (src/main.ts, ROLES=gateway) serving the built page,
 * two people in Debian's Chromium; the teacher draws a stroke of POINTS mouse
 * moves (default 400) at a person's pace, the student watches it grow.
 *
 * Printed: frames and bytes the drawing page sent for the board (operations
 * and stroke deltas), the operations committed for it (acks with a seq), and
 * the stroke's final encoded size (its JSON in the snapshot). Targets: bytes
 * sent at most 3x the final size; at most 5 committed operations.
 *
 * Options: POINTS (default 400), RUNS (default 3), MOVE_MS (pause between
 * mouse moves, default 0: as fast as playwright moves the mouse), WEB_DIR (a built page; default: built from this
 * tree's sources, as the tests do).
 */
import postgres from 'postgres';
import { chromium, type Page } from 'playwright-core';
import { loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { createDeps } from '../../src/deps.js';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import { topUp } from '../../src/domain/ledger.js';
import { createPartner } from '../../src/domain/partners.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { builtWeb } from '../../test/board/web.js';
import { spawnGateway } from './fanout.js';

const POINTS = Number(process.env.POINTS ?? 400);
const RUNS = Number(process.env.RUNS ?? 3);
const MOVE_MS = Number(process.env.MOVE_MS ?? 0);

interface Sent {
  frames: number;
  bytes: number;
}

async function main(): Promise<void> {
  const base = loadConfig();
  const run = `${Date.now().toString(36)}${randomBase62(4).toLowerCase()}`;
  const url = new URL(base.DATABASE_URL);
  url.pathname = `/lessons_bench_stroke_${run}`;
  const config = loadConfig({ ...process.env, DATABASE_URL: url.toString(), REDIS_KEY_PREFIX: `bench:stroke:${run}:`, LOG_LEVEL: 'silent' });
  await migrate(config.DATABASE_URL);
  const deps = createDeps(config);
  const web = process.env.WEB_DIR ?? builtWeb();
  const gw = await spawnGateway({ DATABASE_URL: config.DATABASE_URL, REDIS_URL: config.REDIS_URL, REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX, WEB_DIR: web, BOARD_PREVIEW_DEBOUNCE_MS: '60000' });
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
  const origin = `http://127.0.0.1:${gw.port}`;
  try {
    const { loadavg } = await import('node:os');
    console.log(`bench/board/stroke: ${POINTS}-point stroke, ${RUNS} runs, a mouse move every ${MOVE_MS} ms; load average at start ${loadavg().map((l) => l.toFixed(2)).join(' ')}; page from ${web}`);
    const partner = await createPartner(deps.sql, { name: 'bench' });
    await topUp(deps.sql, { partnerId: partner.id, minutes: 100_000, at: new Date() });
    const rows: { sent: Sent; ops: Sent; deltas: Sent; committed: number; finalBytes: number; points: number; seenLive: boolean; drawMs: number }[] = [];
    for (let r = 0; r < RUNS; r++) {
      const lesson = await createLesson(deps.sql, partner, { title: `stroke ${r}`, mode: 'board_only' }, new Date());
      const link = (id: string, role: 'teacher' | 'student') =>
        issueLink(deps.sql, { partner, lesson, input: { user: { id, name: id, role }, ttl_minutes: 60 }, embedBaseUrl: origin, at: new Date() });
      const ops: Sent = { frames: 0, bytes: 0 };
      const deltas: Sent = { frames: 0, bytes: 0 };
      let committed = 0;
      const drawer = await openPage(browser, (await link('t', 'teacher')).url, (page) =>
        page.on('websocket', (ws) => {
          ws.on('framesent', (f) => {
            const text = String(f.payload);
            const bytes = Buffer.byteLength(text);
            if (text.startsWith('{"type":"board.op"')) (ops.frames++, (ops.bytes += bytes));
            else if (text.startsWith('{"type":"board.stroke"')) (deltas.frames++, (deltas.bytes += bytes));
          });
          ws.on('framereceived', (f) => {
            if (/^\{"type":"board.ack","ref":"[^"]+","seq":\d/.test(String(f.payload))) committed++;
          });
        }),
      );
      const watcher = await openPage(browser, (await link('s', 'student')).url);
      let seenLive = false;
      const box = (await drawer.locator('[data-testid=board] canvas').last().boundingBox())!;
      await drawer.locator('[data-testid="toolbar-freedraw"]').click({ force: true });
      const x0 = box.x + 320;
      const y0 = box.y + 300;
      await drawer.mouse.move(x0, y0);
      const t0 = performance.now();
      await drawer.mouse.down();
      for (let i = 1; i < POINTS; i++) {
        // a spiral-ish scribble: every move a new point (no two the same)
        await drawer.mouse.move(x0 + i * 1.2, y0 + Math.sin(i / 9) * 80);
        if (MOVE_MS) await new Promise((res) => setTimeout(res, MOVE_MS));
        if (i === Math.floor(POINTS / 2)) seenLive = Number(await watcher.locator('[data-testid=board]').getAttribute('data-elements')) > 0;
      }
      await drawer.mouse.up();
      const drawMs = performance.now() - t0;
      await watcher.waitForFunction(() => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) === 1, null, { timeout: 15_000 });
      // the stroke as stored, once its last write is committed
      let row: { data: { points: unknown[] } } | undefined;
      for (let k = 0; k < 100; k++) {
        await new Promise((res) => setTimeout(res, 100));
        [row] = await deps.sql<{ data: { points: unknown[] } }[]>`SELECT data FROM board_elements WHERE lesson_id = ${lesson.id} AND NOT deleted`;
        if (row && row.data.points.length >= POINTS * 0.9 && committed > 0) break;
      }
      await new Promise((res) => setTimeout(res, 500)); // late frames
      const finalBytes = Buffer.byteLength(JSON.stringify(row!.data));
      rows.push({ sent: { frames: ops.frames + deltas.frames, bytes: ops.bytes + deltas.bytes }, ops, deltas, committed, finalBytes, points: row!.data.points.length, seenLive, drawMs });
      await drawer.context().close();
      await watcher.context().close();
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    for (const [i, r] of rows.entries()) {
      console.log(
        `  run ${i + 1}: drawn in ${(r.drawMs / 1000).toFixed(1)} s, stored ${r.points} points, ${r.finalBytes} B; sent ${r.sent.frames} frames, ${r.sent.bytes} B (${(r.sent.bytes / r.finalBytes).toFixed(2)}x): ` +
          `${r.ops.frames} board.op (${r.ops.bytes} B) + ${r.deltas.frames} board.stroke (${r.deltas.bytes} B); committed operations ${r.committed}; the other page saw it while drawn: ${r.seenLive}`,
      );
    }
    console.log(
      `  median: sent ${med(rows.map((r) => r.sent.bytes))} B for a final ${med(rows.map((r) => r.finalBytes))} B (${med(rows.map((r) => r.sent.bytes / r.finalBytes)).toFixed(2)}x, target <= 3x); ` +
        `${med(rows.map((r) => r.sent.frames))} frames; committed operations ${med(rows.map((r) => r.committed))} (target <= 5)`,
    );
  } finally {
    await browser.close();
    await gw.stop();
    const keys = await deps.redis.keys('*').catch(() => [] as string[]);
    if (keys.length) await deps.redis.del(...keys.map((k) => k.slice(config.REDIS_KEY_PREFIX.length)));
    await deps.close();
    const admin = new URL(base.DATABASE_URL);
    admin.pathname = '/postgres';
    const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
    await sql.unsafe(`DROP DATABASE IF EXISTS "lessons_bench_stroke_${run}" WITH (FORCE)`);
    await sql.end();
  }
}

async function openPage(browser: import('playwright-core').Browser, url: string, before?: (page: Page) => void): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await ctx.newPage();
  before?.(page);
  await page.goto(url);
  await page.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 30_000 });
  await page.locator('[data-testid=board]').waitFor();
  return page;
}

await main();
