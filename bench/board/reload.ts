/**
 * `npm run bench:board:reload`: how soon a reloaded page shows the board
 * (issue 12, "Load and reload"; docs/benchmarks.md, "Board: a reload").
 * A real gateway process serving the built page, Debian's Chromium: the
 * teacher draws three strokes, a rectangle and a text; the student's page
 * opens late and then reloads RELOADS times. Each time is from the start of
 * the navigation (performance.timeOrigin) to the board on screen with all
 * five shapes. Target: every reload under 2 s. LATE late joiners (each a
 * new browser context: nothing cached) are timed the same way, first load
 * of the page included.
 *
 * The suite's test (test/board/sync.browser.test.ts) checks that every
 * reload shows the board and its shapes; the time is measured here, on a
 * machine doing nothing else, not in the suite beside other browser runs.
 *
 * Options: RELOADS (default 20), LATE (default 5), WEB_DIR (a built page; default: built from
 * this tree's sources, as the tests do).
 */
import os from 'node:os';
import { drawRect, drawStroke, showsExactly, typeText } from '../../test/board/actions.js';
import { browserBench } from './env.js';

const RELOADS = Number(process.env.RELOADS ?? 20);
const LATE = Number(process.env.LATE ?? 5);

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function main(): Promise<void> {
  console.log(`load average at start: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const bench = await browserBench('bench_reload');
  try {
    const { teacher, student } = await bench.lesson('reload bench');
    const a = await bench.open(teacher);
    for (let i = 0; i < 3; i++) await drawStroke(a, [320 + i * 150, 300], 100, 8);
    await drawRect(a, [420, 480], [150, 80]);
    await typeText(a, [650, 450], 'Homework: page 12');
    await showsExactly(a, 5);

    const late: number[] = [];
    for (let i = 0; i < LATE; i++) {
      const j = await bench.open(student);
      await showsExactly(j, 5);
      late.push(await j.evaluate(() => performance.now()));
      await j.context().close();
    }
    const b = await bench.open(student);
    await showsExactly(b, 5);
    const times: number[] = [];
    for (let i = 0; i < RELOADS; i++) {
      await b.reload();
      await showsExactly(b, 5, 10_000);
      times.push(await b.evaluate(() => performance.now()));
    }
    const over = times.filter((t) => t >= 2000).length;
    console.log(`late joiners, nothing cached (ms from navigation start to the board): ${late.map((t) => Math.round(t)).join(', ')}; median ${Math.round(pct(late, 50))} ms`);
    console.log(`reloads (ms from navigation start to the board with its 5 shapes): ${times.map((t) => Math.round(t)).join(', ')}`);
    console.log(`  median ${Math.round(pct(times, 50))} ms  p90 ${Math.round(pct(times, 90))} ms  max ${Math.round(Math.max(...times))} ms  (n=${times.length}); ${over} of ${times.length} at or over the 2 s target`);
    console.log(`load average at end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    await a.context().close();
    await b.context().close();
  } finally {
    await bench.close();
  }
}

await main();
