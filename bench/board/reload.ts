/**
 * `npm run bench:board:reload`: how soon a reloaded page shows the board
 * (docs/benchmarks.md, "Board").
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
 * Settings: `npm run bench:board:reload -- --help`.
 */
import os from 'node:os';
import { drawRect, drawStroke, showsExactly, typeText } from '../../test/board/actions.js';
import { environment } from '../lib/cli.js';
import { browserBench } from './env.js';

const env = environment('npm run bench:board:reload: time to the board on screen after a reload and for a late joiner, in Chromium', {
  RELOADS: { default: '20', help: "reloads of the student's page" },
  LATE: { default: '5', help: 'late joiners, each with nothing cached' },
  WEB_DIR: { help: "a built page (default: built from this tree's sources, as the tests do)" },
});
const RELOADS = Number(env.RELOADS);
const LATE = Number(env.LATE);

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
