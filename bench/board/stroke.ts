/**
 * `npm run bench:board:stroke`: what one long freehand stroke costs on the
 * wire (docs/benchmarks.md, "Board").
 * A real gateway process (src/main.ts, ROLES=gateway) serving the built page,
 * two people in Debian's Chromium; the teacher draws a stroke of POINTS mouse
 * moves (default 400) at a person's pace, the student watches it grow.
 *
 * Printed: frames and bytes the drawing page sent for the board (operations
 * and stroke deltas), the operations committed for it (acks with a seq), and
 * the stroke's final encoded size (its JSON in the snapshot). Targets: bytes
 * sent at most 3x the final size; at most 5 committed operations.
 *
 * Settings: `npm run bench:board:stroke -- --help`.
 */
import { environment } from '../lib/cli.js';
import { browserBench } from './env.js';

const env = environment('npm run bench:board:stroke: bytes sent and operations committed for one freehand stroke drawn in Chromium', {
  POINTS: { default: '400', help: 'mouse moves of the stroke' },
  RUNS: { default: '3', help: 'strokes drawn' },
  MOVE_MS: { default: '0', help: 'pause between mouse moves (0: as fast as playwright moves the mouse)' },
  WEB_DIR: { help: "a built page (default: built from this tree's sources, as the tests do)" },
});
const POINTS = Number(env.POINTS);
const RUNS = Number(env.RUNS);
const MOVE_MS = Number(env.MOVE_MS);

interface Sent {
  frames: number;
  bytes: number;
}

async function main(): Promise<void> {
  const bench = await browserBench('bench_stroke');
  try {
    const { loadavg } = await import('node:os');
    console.log(`bench/board/stroke: ${POINTS}-point stroke, ${RUNS} runs, a mouse move every ${MOVE_MS} ms; load average at start ${loadavg().map((l) => l.toFixed(2)).join(' ')}; page from ${bench.web}`);
    const rows: { sent: Sent; ops: Sent; deltas: Sent; committed: number; finalBytes: number; points: number; seenLive: boolean; drawMs: number }[] = [];
    for (let r = 0; r < RUNS; r++) {
      const { lesson, teacher, student } = await bench.lesson(`stroke ${r}`);
      const ops: Sent = { frames: 0, bytes: 0 };
      const deltas: Sent = { frames: 0, bytes: 0 };
      let committed = 0;
      const drawer = await bench.open(teacher, (page) =>
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
      const watcher = await bench.open(student);
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
        [row] = await bench.deps.sql<{ data: { points: unknown[] } }[]>`SELECT data FROM board_elements WHERE lesson_id = ${lesson.id} AND NOT deleted`;
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
    await bench.close();
  }
}

await main();
