/**
 * `npm run bench:board:replay -- --ops 3000`: the replay page's load time for a one-hour lesson's
 * history, in Debian's Chromium against a real gateway process. The history is written through
 * the board's own commit (BoardStore) spread over an hour: strokes of 20-120 points, moves,
 * deletes and their undo, a new page now and then, as two people draw. `--ops` is the operations
 * of that hour (the board soak prints what its drawing makes per hour). Measured: the page's
 * history read (its own figure), the time from opening the link to the board shown, and a scrub
 * to the last moment (the board rebuilt from the whole history and drawn); baseline, in the same
 * run, the participant page opening the same board.
 */
import { performance } from 'node:perf_hooks';
import os from 'node:os';
import { commandLine } from '../lib/cli.js';
import { BoardStore } from '../../src/board/store.js';
import type { BoardElement, BoardOp } from '../../src/board/schema.js';
import { issueReplayLink } from '../../src/domain/replay.js';
import { rect, stroke } from '../../test/board/factories.js';
import { rng } from '../../test/board/random.js';
import { browserBench } from './env.js';

const { values } = commandLine('npm run bench:board:replay: the replay page\'s load time for a one-hour lesson\'s history, in Chromium', {
  ops: { type: 'string', default: '3000', help: 'operations in the lesson hour' },
  rounds: { type: 'string', default: '3', help: 'page loads measured (the median is printed)' },
});
const OPS = Number(values.ops);
const ROUNDS = Number(values.rounds);

/** A lesson hour of drawing: what `OPS` operations of two people look like. */
function lessonHour(n: number): { op: BoardOp; role: 'teacher' | 'student' }[] {
  const r = rng(44);
  const out: { op: BoardOp; role: 'teacher' | 'student' }[] = [];
  const live: BoardElement[] = [];
  const gone: BoardElement[] = [];
  let page = 'page-1';
  for (let i = 0; out.length < n; i++) {
    const role = r() < 0.6 ? 'teacher' : 'student';
    const k = r();
    if (k < 0.003 && role === 'teacher') {
      page = `pg-${i}`;
      out.push({ role, op: { type: 'page.add', page: { id: page, name: `Page ${i}` }, after_page_id: null } });
    } else if (k < 0.75 || live.length < 5) {
      const z = `a${i.toString(36).padStart(5, '0')}`;
      const el = r() < 0.85 ? stroke(`s${i}`, 20 + Math.floor(r() * 100), { page_id: page, z, x: Math.floor(r() * 900), y: Math.floor(r() * 600) }) : rect(`r${i}`, { page_id: page, z, x: Math.floor(r() * 900), y: Math.floor(r() * 600) });
      live.push(el);
      out.push({ role, op: { type: 'element.add', elements: [el] } });
    } else if (k < 0.88) {
      const j = Math.floor(r() * live.length);
      live[j] = { ...live[j], x: live[j].x + 10, version: live[j].version + 1 };
      out.push({ role: 'teacher', op: { type: 'element.update', elements: [live[j]] } });
    } else if (k < 0.95 || !gone.length) {
      const [el] = live.splice(Math.floor(r() * live.length), 1);
      gone.push({ ...el, version: el.version + 1 });
      out.push({ role: 'teacher', op: { type: 'element.delete', elements: [{ id: el.id, version: el.version + 1, version_nonce: 0 }] } });
    } else {
      const el = gone.pop()!;
      const back = { ...el, version: el.version + 1 };
      live.push(back);
      out.push({ role: 'teacher', op: { type: 'element.update', elements: [back] } });
    }
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const bench = await browserBench('replay_board');
  try {
    const { lesson, teacher } = await bench.lesson('replay bench');
    const store = new BoardStore(bench.deps.sql);
    const hour = lessonHour(OPS);
    const t0 = Date.now() - 3600_000;
    const w0 = performance.now();
    for (let i = 0; i < hour.length; i += 50) {
      const items = hour.slice(i, i + 50).map(({ op, role }) => ({ op, actor: { role, person_id: role === 'teacher' ? 'bench-t' : 'bench-s' } }));
      const results = await store.commitBatch(lesson.id, items, new Date(t0 + (i / hour.length) * 3600_000));
      const refused = results.find((x) => !x.ok);
      if (refused && !refused.ok) throw new Error(`operation refused: ${refused.error.message}`);
    }
    const [h] = await bench.deps.sql<{ ops: number; bytes: number }[]>`SELECT count(*)::int AS ops, sum(pg_column_size(b.*))::int + count(*)::int * 52 AS bytes FROM board_history b WHERE lesson_id = ${lesson.id}`;
    console.log(`history: ${h.ops} operations, ${(h.bytes / 1e6).toFixed(2)} MB stored, written in ${((performance.now() - w0) / 1000).toFixed(1)} s`);
    const link = await issueReplayLink(bench.deps.sql, { lesson, ttlMinutes: 60, embedBaseUrl: new URL(teacher).origin, at: new Date() });

    const read: number[] = [];
    const shown: number[] = [];
    const toEnd: number[] = [];
    const live: number[] = [];
    for (let k = 0; k < ROUNDS; k++) {
      const t = performance.now();
      const page = await bench.open(teacher);
      live.push(performance.now() - t);
      await page.context().close();

      const r0 = performance.now();
      const replay = await (await page.context().browser()!.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
      await replay.goto(link.url);
      await replay.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 120_000 });
      shown.push(performance.now() - r0);
      read.push(Number(await replay.locator('[data-testid=replay]').getAttribute('data-load-ms')));
      const end = await replay.locator('[data-testid=replay]').evaluate((el) => Number(el.getAttribute('data-end')) - Number(el.getAttribute('data-start')));
      const s0 = performance.now();
      await replay.locator('[data-testid=replay-scrub]').fill(String(end));
      await replay.waitForFunction((n) => document.querySelector('[data-testid=board]')?.getAttribute('data-seq') === String(n), h.ops, { timeout: 120_000 });
      await replay.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      toEnd.push(performance.now() - s0);
      await replay.context().close();
    }
    const ms = (xs: number[]) => `${Math.round(median(xs))} ms`;
    console.log(`replay of ${h.ops} operations (median of ${ROUNDS}): history read ${ms(read)}, link opened to board shown ${ms(shown)}, scrub to the last moment ${ms(toEnd)}; baseline: the participant page opening the same board ${ms(live)}`);
    console.log(`load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  } finally {
    await bench.close();
  }
}

await main();
