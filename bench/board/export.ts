/**
 * `npm run bench:board:export`: how long the notes PDF of a board takes
 * (docs/benchmarks.md, "Board"). A board of PAGES pages and ELEMENTS elements
 * in all (a tutor's handwriting mix: strokes, shapes, text, formulas) is
 * written to a database of the run's own and exported ROUNDS times through the
 * real render pool (src/board/render/pool.ts: a child process, with its time
 * and memory limits), as the API's `export.pdf` and the page's download do;
 * the cache of finished exports is bypassed, so each round renders. The
 * render child's peak resident memory is sampled. Baseline in the same run:
 * the preview PNG of the board's first page through the same pool. Then one
 * export of a board at the default element limit (BOARD_EXPORT_MAX_ELEMENTS).
 *
 * Settings: `npm run bench:board:export -- --help`.
 */
import os from 'node:os';
import { createLesson } from '../../src/domain/lessons.js';
import { createPartner } from '../../src/domain/partners.js';
import { NotesExport } from '../../src/board/notes.js';
import { renderPool } from '../../src/board/preview.js';
import type { BoardElement } from '../../src/board/schema.js';
import { plant } from '../../test/board/bombs.js';
import { childrenRssMb } from '../../test/helpers/rss.js';
import { environment } from '../lib/cli.js';
import { benchDatabase } from './env.js';
import { handwritingPage } from './pages.js';

const env = environment('npm run bench:board:export: export time of a board as a PDF, through the render pool', {
  PAGES: { default: '10', help: 'pages of the board' },
  ELEMENTS: { default: '2000', help: 'elements of the board, spread evenly over its pages' },
  ROUNDS: { default: '5', help: 'exports timed (after one cold export, which starts the render child)' },
  AT_LIMIT: { default: '1', help: '1: also export one board at BOARD_EXPORT_MAX_ELEMENTS' },
});


function board(pages: number, elements: number): { els: BoardElement[]; pages: { id: string; name: string }[] } {
  const per = Math.ceil(elements / pages);
  const list = Array.from({ length: pages }, (_, i) => ({ id: `p${i}`, name: `Page ${i + 1}` }));
  const els = list.flatMap((pg, i) => handwritingPage(Math.min(per, elements - i * per)).map((e) => ({ ...e, id: `${e.id}-${i}`, page_id: pg.id })));
  return { els, pages: list };
}

async function main(): Promise<void> {
  console.log(`load average at start: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const db = await benchDatabase('bench_export');
  const pool = renderPool(db.config);
  try {
    const partner = await createPartner(db.deps.sql, { name: 'Export bench' });
    const lesson = async (pages: number, elements: number) => {
      const l = await createLesson(db.deps.sql, partner, { title: 'Export bench', subject_mode: 'math' }, new Date());
      const b = board(pages, elements);
      await plant(db.deps.sql, l.id, b.els, b.pages);
      return l.id;
    };
    const limits = new NotesExport(db.deps.sql, db.config).limits;
    const timed = async <T>(f: () => Promise<T>) => {
      let peak = 0;
      const sample = setInterval(() => (peak = Math.max(peak, childrenRssMb('render/worker'))), 20);
      const t0 = performance.now();
      const out = await f();
      const ms = performance.now() - t0;
      clearInterval(sample);
      return { out, ms, peak };
    };
    const pages = Number(env.PAGES);
    const elements = Number(env.ELEMENTS);
    const id = await lesson(pages, elements);
    // the child's first start compiles the sources (tsx) at low priority: on a busy machine it may
    // miss the pool's start-up limit, so the cold export is tried up to three times
    let cold: Awaited<ReturnType<typeof timed>> | undefined;
    for (let attempt = 0; !cold; attempt++) {
      try {
        cold = await timed(() => pool.exportPdf(id, limits));
      } catch (err) {
        if (attempt === 2) throw err;
        console.log(`cold export failed (${(err as Error).message}); again`);
      }
    }
    const runs: number[] = [];
    let peak = cold.peak;
    let bytes = 0;
    for (let i = 0; i < Number(env.ROUNDS); i++) {
      const r = await timed(() => pool.exportPdf(id, limits));
      if (r.out?.kind !== 'pdf') throw new Error(`export gave ${r.out?.kind}`);
      runs.push(r.ms);
      peak = Math.max(peak, r.peak);
      bytes = r.out.pdf.length;
    }
    const previews: number[] = [];
    for (let i = 0; i < Number(env.ROUNDS); i++) previews.push((await timed(() => pool.render(id, db.config.BOARD_PREVIEW_WIDTH))).ms);
    const sorted = [...runs].sort((a, b) => a - b);
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(`export of ${pages} pages, ${elements} elements: median ${Math.round(med(runs))} ms, max ${Math.round(sorted[sorted.length - 1])} ms (cold, child start included: ${Math.round(cold.ms)} ms); ${Math.round(bytes / 1024)} KB; render child peak RSS ${Math.round(peak)} MB`);
    console.log(`baseline, preview PNG of page 1 through the same pool: median ${Math.round(med(previews))} ms`);
    if (env.AT_LIMIT === '1') {
      const big = await lesson(10, limits.elements);
      try {
        const r = await timed(() => pool.exportPdf(big, limits));
        console.log(`export at the limit (10 pages, ${limits.elements} elements): ${Math.round(r.ms)} ms of ${limits.timeoutMs} ms allowed; ${r.out?.kind === 'pdf' ? Math.round(r.out.pdf.length / 1024) : '-'} KB; render child peak RSS ${Math.round(r.peak)} MB of ${db.config.BOARD_RENDER_MEMORY_MB} MB`);
      } catch (err) {
        // on a machine busier than the limits were set for: the figure is that it did not fit
        console.log(`export at the limit (10 pages, ${limits.elements} elements): ${(err as Error).message} (load ${os.loadavg()[0].toFixed(1)})`);
      }
    }
    console.log(`load average at end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  } finally {
    pool.close();
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
