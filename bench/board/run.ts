/**
 * `npm run bench:board`: the board figures that do not need the gateway
 * (docs/benchmarks.md, "Board"). Every load targets 127.0.0.1, every loop is
 * bounded in count and time. Uses its own database and Redis prefix, removed
 * at the end.
 *
 *   - preview render time of a 2,000-element page (target: under 200 ms), two mixes
 *   - GET /lessons/{id}/snapshot latency (2,000 and 50 elements) through the real API
 *   - GET /lessons/{id}/preview latency: cached picture vs. rendered on read
 *   - operation sequencing latency (submit -> durable ack) with 30 people drawing at a human rate
 *   - fan-out through the real gateway (bench/board/fanout.ts): 30 people drawing in one lesson, and
 *     1,000 lessons of 3 people: fan-out latency p50/p99, gateway CPU seconds per 1,000 operations
 *
 * Settings: `npm run bench:board -- --help`.
 */
import type { Deps } from '../../src/deps.js';
import { createApiKey } from '../../src/domain/apiKeys.js';
import { createLesson } from '../../src/domain/lessons.js';
import { createPartner } from '../../src/domain/partners.js';
import { startApi } from '../../src/server.js';
import { renderPagePng } from '../../src/board/render/png.js';
import { renderPageSvg } from '../../src/board/render/svg.js';
import { BoardService } from '../../realtime/features/board/service.js';
import type { BoardElement } from '../../src/board/schema.js';
import { handwritingPage, textHeavyPage } from './pages.js';
import { benchDatabase } from './env.js';
import { fanout, report, spawnGateway } from './fanout.js';
import type { Config } from '../../src/config.js';
import { topUp } from '../../src/domain/ledger.js';
import type { Partner } from '../../src/domain/partners.js';
import { environment } from '../lib/cli.js';

const env = environment('npm run bench:board: preview render, snapshot and preview latency, sequencing, fan-out through a real gateway', {
  RUNS: { default: '15', help: 'renders per page mix' },
  DRAW_SECONDS: { default: '5', help: 'seconds of drawing in the sequencing part (at most 30)' },
  FANOUT_SECONDS: { default: '10', help: 'seconds of drawing in each fan-out part (at most 60)' },
  LESSONS: { default: '1000', help: 'lessons of 3 in the many-lessons fan-out (at most 2000)' },
  LESSON_PAUSE_MS: { default: '3000', help: "pause between one person's strokes in the many-lessons part" },
  PARTS: { default: 'render,api,sequencing,fanout30,fanout1000', help: 'the parts to run, comma-separated' },
  PREVIEW_DEBOUNCE_MS: { help: "the gateway's BOARD_PREVIEW_DEBOUNCE_MS in the fan-out parts" },
  GATEWAY_POOL: { help: "the gateway's DATABASE_POOL_SIZE in the fan-out parts" },
});
const RUNS = Number(env.RUNS);
const DRAW_SECONDS = Math.min(30, Number(env.DRAW_SECONDS));
const FANOUT_SECONDS = Math.min(60, Number(env.FANOUT_SECONDS));
const LESSONS = Math.min(2000, Number(env.LESSONS));
const LESSON_PAUSE_MS = Number(env.LESSON_PAUSE_MS);
const PARTS = new Set(env.PARTS!.split(','));

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const ms = (v: number) => `${v.toFixed(1)} ms`;
const line = (label: string, xs: number[]) =>
  console.log(`  ${label.padEnd(50)} median ${ms(pct(xs, 50)).padStart(9)}  p90 ${ms(pct(xs, 90)).padStart(9)}  p99 ${ms(pct(xs, 99)).padStart(9)}  (n=${xs.length})`);

async function time<T>(fn: () => Promise<T> | T): Promise<[number, T]> {
  const t = performance.now();
  const r = await fn();
  return [performance.now() - t, r];
}

async function previewRender(): Promise<void> {
  console.log(`\nPreview render of one 2,000-element page (SVG build + resvg, 800 px wide), ${RUNS} runs each`);
  for (const [name, page] of [['handwriting-heavy mix (70% strokes, 10% text)', handwritingPage(2000)], ['text-heavy mix (20% text, 20% strokes)', textHeavyPage(2000)]] as const) {
    await renderPagePng(page, 800); // warm-up: font loading, code paths
    const total: number[] = [];
    const svg: number[] = [];
    let cpu = 0;
    for (let i = 0; i < RUNS; i++) {
      const c0 = process.cpuUsage();
      total.push((await time(() => renderPagePng(page, 800)))[0]);
      const c = process.cpuUsage(c0);
      cpu += (c.user + c.system) / 1000;
      svg.push((await time(() => renderPageSvg(page, { outputWidth: 800 })))[0]);
    }
    line(`${name}: total`, total);
    line('  of which SVG build (JS)', svg);
    // CPU time (all threads) is what a render costs whatever else runs on the machine
    console.log(`  ${'  CPU time per render (all threads)'.padEnd(50)} mean ${ms(cpu / RUNS).padStart(9)}`);
  }
}

async function main(): Promise<void> {
  const db = await benchDatabase('bench_board', { API_PORT: '0', HOST: '127.0.0.1' });
  const { config, deps } = db;
  const board = new BoardService(deps, { previewDebounceMs: 60_000 });
  const api = await startApi(deps, 0);
  try {
    console.log(`bench/board on ${process.platform}, node ${process.version}, ${(await import('node:os')).cpus().length} cores`);
    if (PARTS.has('render')) await previewRender();

    const partner = await createPartner(deps.sql, { name: 'bench' });
    const { apiKey } = await createApiKey(deps.sql, partner.id);
    await topUp(deps.sql, { partnerId: partner.id, minutes: 10_000_000, at: new Date() });
    await fanoutParts(config, deps, partner);
    const get = async (path: string) => {
      const res = await fetch(`http://127.0.0.1:${api.port}/api/partner/v1${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
    };
    if (PARTS.has('api')) await apiParts(deps, board, partner, get);
    if (PARTS.has('sequencing')) await sequencing(deps, board, partner);
  } finally {
    await board.close();
    await api.close();
    await db.drop();
  }
}

const teacher = { role: 'teacher' as const };
const fillBoard = async (board: BoardService, lessonId: string, els: BoardElement[]) => {
  for (let i = 0; i < els.length; i += 100) await board.submit(lessonId, { type: 'element.add', elements: els.slice(i, i + 100) }, teacher);
};

async function fanoutParts(config: Config, deps: Deps, partner: Partner): Promise<void> {
  if (!PARTS.has('fanout30') && !PARTS.has('fanout1000')) return;
  const gw = await spawnGateway({
    DATABASE_URL: config.DATABASE_URL,
    REDIS_URL: config.REDIS_URL,
    REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX,
    GATEWAY_MAX_CONNECTIONS_PER_IP: '100000',
    // the gateway's own defaults unless asked otherwise
    ...(env.PREVIEW_DEBOUNCE_MS ? { BOARD_PREVIEW_DEBOUNCE_MS: env.PREVIEW_DEBOUNCE_MS } : {}),
    ...(env.GATEWAY_POOL ? { DATABASE_POOL_SIZE: env.GATEWAY_POOL } : {}),
  });
  try {
    if (PARTS.has('fanout30')) {
      console.log(`\nFan-out through the gateway: 30 people in one lesson, all drawing at a human rate, ${FANOUT_SECONDS} s`);
      report(await fanout(deps, partner, gw, { lessons: 1, people: 30, drawers: 30, seconds: FANOUT_SECONDS, pauseMs: 1000, label: 'fan-out 30' }), 29);
    }
    if (PARTS.has('fanout1000')) {
      console.log(`\nFan-out through the gateway: ${LESSONS} lessons of 3 people, one drawing at a time (1 s strokes, ${LESSON_PAUSE_MS} ms pauses), ${FANOUT_SECONDS} s`);
      report(await fanout(deps, partner, gw, { lessons: LESSONS, people: 3, drawers: 1, seconds: FANOUT_SECONDS, pauseMs: LESSON_PAUSE_MS, label: 'fan-out 1000' }), 2);
    }
  } finally {
    await gw.stop();
  }
}

async function apiParts(deps: Deps, board: BoardService, partner: Partner, get: (path: string) => Promise<void>): Promise<void> {
    const fill = (lessonId: string, els: BoardElement[]) => fillBoard(board, lessonId, els);
    console.log('\nGET /lessons/{id}/snapshot through the API (HTTP on loopback), 40 requests each');
    for (const n of [2000, 50]) {
      const lesson = await createLesson(deps.sql, partner, { title: `snap ${n}` }, new Date());
      await fill(lesson.id, handwritingPage(n));
      await get(`/lessons/${lesson.id}/snapshot`);
      const xs: number[] = [];
      for (let i = 0; i < 40; i++) xs.push((await time(() => get(`/lessons/${lesson.id}/snapshot`)))[0]);
      line(`${n} elements`, xs);
    }

    console.log('\nGET /lessons/{id}/preview through the API, 2,000-element page');
    const pv = await createLesson(deps.sql, partner, { title: 'preview' }, new Date());
    await fill(pv.id, handwritingPage(2000));
    const stale: number[] = [];
    for (let i = 0; i < Math.min(RUNS, 10); i++) {
      await board.submit(pv.id, { type: 'element.update', elements: [{ ...handwritingPage(1)[0], x: i, version: i + 2 }] }, teacher);
      stale.push((await time(() => get(`/lessons/${pv.id}/preview`)))[0]);
    }
    const cached: number[] = [];
    for (let i = 0; i < 40; i++) cached.push((await time(() => get(`/lessons/${pv.id}/preview`)))[0]);
    line('board changed since last render (renders on read)', stale);
    line('current picture cached in Postgres', cached);

}

async function sequencing(deps: Deps, board: BoardService, partner: Partner): Promise<void> {
    console.log(`\nSequencing: 30 people in one lesson drawing at a human rate for ${DRAW_SECONDS} s (one node, no gateway)`);
    const lesson = await createLesson(deps.sql, partner, { title: 'draw' }, new Date());
    const acks: number[] = [];
    let ops = 0;
    const txBefore = await xactCommit(deps);
    const cpu0 = process.cpuUsage();
    const end = Date.now() + DRAW_SECONDS * 1000;
    await Promise.all(
      Array.from({ length: 30 }, async (_, who) => {
        // a person: a stroke grows for ~1 s with an update every 80 ms (the page batches at 60 ms), then a pause of ~1 s
        let k = 0;
        while (Date.now() < end) {
          const id = `p${who}s${k++}`;
          const pts: [number, number][] = [];
          for (let step = 0; step < 12 && Date.now() < end; step++) {
            for (let j = 0; j < 5; j++) pts.push([pts.length * 2, Math.round(Math.sin(pts.length / 4) * 10)]);
            const el = { ...handwritingPage(1)[0], id, x: who * 50, y: k * 30, points: [...pts], version: step + 1 }; // each update a newer version
            const [t] = await time(() => board.submit(lesson.id, { type: step === 0 ? 'element.add' : 'element.update', elements: [el] }, teacher));
            acks.push(t);
            ops++;
            await new Promise((r) => setTimeout(r, 80));
          }
          await new Promise((r) => setTimeout(r, 800 + Math.random() * 400));
        }
      }),
    );
    const cpu = process.cpuUsage(cpu0);
    const tx = (await xactCommit(deps)) - txBefore;
    line(`submit -> durable ack (${ops} ops, ${(ops / DRAW_SECONDS).toFixed(0)} ops/s)`, acks);
    console.log(`  Postgres transactions: ${tx} (${(ops / Math.max(1, tx)).toFixed(2)} ops per transaction, group commit)`);
    console.log(`  this process's CPU: ${(((cpu.user + cpu.system) / 1e6 / ops) * 1000).toFixed(3)} s per 1,000 operations`);
}

/**
 * Committed transactions of the bench database so far (pg_stat_database),
 * after waiting for every backend to report: Postgres 15 flushes a backend's
 * counts at most once a second, else when it has been idle for 10 s.
 */
async function xactCommit(deps: Deps): Promise<number> {
  await new Promise((r) => setTimeout(r, 11_000));
  await deps.sql`SELECT pg_stat_clear_snapshot()`;
  const [r] = await deps.sql<{ n: number }[]>`SELECT xact_commit::int8 AS n FROM pg_stat_database WHERE datname = current_database()`;
  return r.n;
}

await main();
