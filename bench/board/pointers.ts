/**
 * `npm run bench:pointers`: the others' pointers on the board (docs/benchmarks.md, "Pointers").
 *
 * Two real gateway processes (src/main.ts, ROLES=gateway) on one database and Redis, serving the
 * built page; a lesson of 20 people: the measuring pair are real pages in Debian's Chromium, the
 * teacher on node A and a student on node B (so every pointer crosses the bus), and 18 lean
 * WebSocket clients, 9 on each node, that move their pointers at the page's send rate.
 *
 * 1. Latency screen to screen: the teacher's mouse moves every MOVE_MS (40: the page's send rate at
 *    the default budget) for SECONDS; for each position the student's page shows, the time from the
 *    teacher's pointermove (her page's clock) to the frame where the student's page gave the editor
 *    the pointer (its clock; one machine, one wall clock). p50 / p99 / max, and how many of the moves
 *    were shown (the rest were coalesced into a later one, as meant).
 * 2. The student's page CPU (Chrome's TaskDuration through the DevTools protocol: main-thread work
 *    of the page) over SECONDS while 10 others move their pointers on its page, against the same
 *    page with nobody moving, and over 3.5 s right after they stop, their 10 pointers still shown
 *    (an idle pointer costs nothing: nothing is drawn again until one moves). With nobody moving, also
 *    the whole browser's CPU (every Chromium process, /proc): what two idle pages cost the machine,
 *    compositing included.
 *
 * Options: SECONDS (default 10), MOVE_MS (default 40), WEB_DIR (a built page; default: built from
 * this tree's sources).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import type { Page } from 'playwright-core';
import WebSocket from 'ws';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import { createPartner } from '../../src/domain/partners.js';
import { topUp } from '../../src/domain/ledger.js';
import { builtWeb, launchChromium } from '../../test/board/web.js';
import { benchDatabase } from './env.js';
import { spawnGateway } from './fanout.js';
import { environment } from '../lib/cli.js';
import { percentile } from '../lib/service.js';

const env = environment('npm run bench:pointers: pointer latency screen to screen with 20 people on two gateway nodes, and a page\'s CPU while ten others move', {
  SECONDS: { default: '10', help: 'how long the pointers move for each figure' },
  MOVE_MS: { default: '40', help: 'the lean clients\' and the teacher\'s time between two pointer moves' },
  WEB_DIR: { help: "a built page (default: built from this tree's sources, as the tests do)" },
});
const SECONDS = Number(env.SECONDS);
const MOVE_MS = Number(env.MOVE_MS);
const OTHERS = 18;
const MOVERS_FOR_CPU = 10;
/** How long the page's CPU is measured with the pointers shown but still: less than the page's idle time for a pointer (5 s). */
const IDLE_SHOWN_MS = 3500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A lean participant: a socket that moves its pointer on a page at the page's rate while `moving`. */
class Mover {
  moving = false;
  private timer: ReturnType<typeof setInterval> | undefined;
  private constructor(readonly ws: WebSocket) {}
  static async open(url: string): Promise<Mover> {
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.on('message', (d) => {
        if (String(d).includes('"type":"welcome"')) resolve();
      });
      ws.once('error', reject);
    });
    return new Mover(ws);
  }
  start(page: string, i: number): void {
    let k = 0;
    this.timer = setInterval(() => {
      k++;
      this.ws.send(JSON.stringify({ type: 'cursor', x: 100 + i * 40 + (k % 50) * 4, y: 200 + i * 20 + Math.sin(k / 5) * 60, page, button: 'up' }));
    }, MOVE_MS);
  }
  stop(): void {
    clearInterval(this.timer);
  }
  close(): void {
    this.stop();
    this.ws.close();
  }
}

/** CPU seconds of this process's Chromium (every process of the browser: its pages, compositor, GPU), from /proc. */
function browserCpuSeconds(): number {
  const stats = new Map<number, string[]>();
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const s = readFileSync(`/proc/${p}/stat`, 'utf8');
      stats.set(Number(p), [s.slice(s.indexOf('(') + 1, s.lastIndexOf(')')), ...s.slice(s.lastIndexOf(')') + 2).split(' ')]);
    } catch {
      // a process that ended meanwhile
    }
  }
  const ours = new Set([process.pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, f] of stats) if (!ours.has(pid) && ours.has(Number(f[2])) && f[0] !== 'node') {
        ours.add(pid);
        grew = true;
      }
  }
  let ticks = 0;
  for (const pid of ours) if (pid !== process.pid) ticks += Number(stats.get(pid)![12]) + Number(stats.get(pid)![13]);
  return ticks / 100;
}

async function taskSeconds(page: Page): Promise<() => Promise<number>> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const read = async () => ((await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'TaskDuration')?.value ?? 0);
  return read;
}

async function main(): Promise<void> {
  const load = loadavg().map((l) => l.toFixed(2)).join(' ');
  const db = await benchDatabase('bench_pointers');
  const { config, deps } = db;
  const web = env.WEB_DIR ?? builtWeb();
  const gatewayEnv = { DATABASE_URL: config.DATABASE_URL, REDIS_URL: config.REDIS_URL, REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX, WEB_DIR: web, BOARD_PREVIEW_DEBOUNCE_MS: '60000' };
  const [a, b] = await Promise.all([spawnGateway(gatewayEnv), spawnGateway(gatewayEnv)]);
  const browser = await launchChromium({ build: 'full' });
  const movers: Mover[] = [];
  try {
    const partner = await createPartner(deps.sql, { name: 'bench pointers' });
    await topUp(deps.sql, { partnerId: partner.id, minutes: 100_000, at: new Date() });
    const lesson = await createLesson(deps.sql, partner, { title: 'Pointers', mode: 'board_only' }, new Date());
    const link = async (id: string, role: 'teacher' | 'student', port: number) =>
      (await issueLink(deps.sql, { partner, lesson, input: { user: { id, name: id, role }, ttl_minutes: 600 }, embedBaseUrl: `http://127.0.0.1:${port}`, at: new Date() })).url;
    const open = async (url: string) => {
      const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
      await page.goto(url);
      await page.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 60_000 });
      return page;
    };
    const teacher = await open(await link('teacher', 'teacher', a.port));
    const student = await open(await link('student', 'student', b.port));
    for (let i = 0; i < OTHERS; i++) {
      const port = i % 2 ? b.port : a.port;
      const url = (await link(`s${i}`, 'student', port)).replace(`http://127.0.0.1:${port}/embed/`, `ws://127.0.0.1:${port}/ws?token=`);
      movers.push(await Mover.open(url));
    }
    // the page both are on (the board's first page), as the page keeps it for the tab
    const page = (await student.evaluate((id) => sessionStorage.getItem(`board.page.${id}`), lesson.id))!;
    console.log(`bench/board/pointers: 20 people on two gateway nodes (2 Chromium pages, ${OTHERS} sockets), a move every ${MOVE_MS} ms, ${SECONDS} s per figure; load average at start ${load}`);

    // ---- 2. the page's CPU: nobody moving, then 10 others moving on its page ----
    const cpu = await taskSeconds(student);
    const busy = async (): Promise<number> => {
      const t0 = await cpu();
      await sleep(SECONDS * 1000);
      return ((await cpu()) - t0) / SECONDS;
    };
    const browserT0 = browserCpuSeconds();
    const idle = await busy();
    const browserIdle = (browserCpuSeconds() - browserT0) / SECONDS;
    movers.slice(0, MOVERS_FOR_CPU).forEach((m, i) => m.start(page, i));
    await student.waitForFunction((n) => JSON.parse(document.querySelector('[data-testid=board]')?.getAttribute('data-pointers') ?? '[]').length >= n, MOVERS_FOR_CPU);
    const moving = await busy();
    movers.slice(0, MOVERS_FOR_CPU).forEach((m) => m.stop());
    // the same 10 pointers still shown, none moving (until the page drops them as idle, POINTER_IDLE_MS)
    await sleep(300);
    const stillT0 = await cpu();
    await sleep(IDLE_SHOWN_MS);
    const still = ((await cpu()) - stillT0) / (IDLE_SHOWN_MS / 1000);
    const shownAfter = await student.evaluate(() => JSON.parse(document.querySelector('[data-testid=board]')?.getAttribute('data-pointers') ?? '[]').length);
    if (shownAfter < MOVERS_FOR_CPU) throw new Error(`only ${shownAfter} pointers were still shown at the end of the idle measure`);

    // ---- 1. latency, with all 18 others moving ----
    movers.forEach((m, i) => m.start(page, i));
    await teacher.evaluate(() => {
      const w = window as unknown as { moves: [number, number][] };
      w.moves = [];
      window.addEventListener('pointermove', (e) => w.moves.push([e.clientX, performance.timeOrigin + performance.now()]), true);
    });
    await student.evaluate(() => {
      const w = window as unknown as { seen: [number, number][] };
      w.seen = [];
      const el = document.querySelector('[data-testid=board]')!;
      new MutationObserver(() => {
        const t = Number(el.getAttribute('data-pointers-at'));
        const mine = JSON.parse(el.getAttribute('data-pointers') ?? '[]').find((p: { name: string }) => p.name === 'teacher');
        if (mine) w.seen.push([mine.x, t]);
      }).observe(el, { attributes: true, attributeFilter: ['data-pointers-at'] });
    });
    // scene x of a client x on the teacher's screen (zoom 1): client x less the canvas's left edge and the scroll
    const offset = await teacher.evaluate(() => {
      const left = document.querySelector('[data-testid=board] .excalidraw')!.getBoundingClientRect().left;
      const view = JSON.parse(document.querySelector('[data-testid=board]')!.getAttribute('data-view')!);
      return left - view.bounds[0];
    });
    const box = (await teacher.locator('[data-testid=board] canvas').last().boundingBox())!;
    const n = Math.floor((SECONDS * 1000) / MOVE_MS);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      await teacher.mouse.move(box.x + 100 + (i % 300) * 3, box.y + 300 + Math.floor(i / 300) * 20);
      const wait = t0 + (i + 1) * MOVE_MS - performance.now();
      if (wait > 0) await sleep(wait);
    }
    await sleep(500);
    movers.forEach((m) => m.stop());
    const moves = (await teacher.evaluate(() => (window as unknown as { moves: [number, number][] }).moves)).map(([cx, t]) => [cx - offset, t] as const);
    const seen = await student.evaluate(() => (window as unknown as { seen: [number, number][] }).seen);
    const latencies: number[] = [];
    let last = -1;
    for (const [x, t] of seen) {
      // the last move to that x before it was shown (x repeats only every 300 moves)
      let best = -1;
      for (let i = moves.length - 1; i >= 0; i--) if (Math.abs(moves[i][0] - x) < 1.2 && moves[i][1] <= t) {
        best = i;
        break;
      }
      if (best < 0 || best === last) continue;
      last = best;
      latencies.push(t - moves[best][1]);
    }
    const f = (ms: number) => `${ms.toFixed(0)} ms`;
    console.log('');
    console.log('| figure | value |');
    console.log('|---|---|');
    console.log(`| pointer latency screen to screen, p50 | ${f(percentile(latencies, 50))} |`);
    console.log(`| pointer latency screen to screen, p99 | ${f(percentile(latencies, 99))} |`);
    console.log(`| pointer latency, max | ${f(Math.max(...latencies))} |`);
    console.log(`| moves shown / made | ${latencies.length} / ${moves.length} |`);
    console.log(`| the student page's CPU, nobody moving | ${(idle * 100).toFixed(1)} % of a core |`);
    console.log(`| the whole browser's CPU (two idle pages, every Chromium process), nobody moving | ${(browserIdle * 100).toFixed(1)} % of a core |`);
    console.log(`| the student page's CPU, ${MOVERS_FOR_CPU} others moving | ${(moving * 100).toFixed(1)} % of a core |`);
    console.log(`| the student page's CPU, ${MOVERS_FOR_CPU} others' pointers shown, none moving (${IDLE_SHOWN_MS / 1000} s) | ${(still * 100).toFixed(1)} % of a core |`);
    console.log(`| load average at the end | ${loadavg().map((l) => l.toFixed(2)).join(' ')} |`);
  } finally {
    for (const m of movers) m.close();
    await browser.close();
    await Promise.all([a.stop(), b.stop()]);
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
