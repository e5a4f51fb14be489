/**
 * `npm run soak:board -- --actions 200 --seed N`: the randomised two-person
 * session (test/board/random.ts) for as long as asked, against a real gateway
 * process serving the built page, in Debian's Chromium. Without `--seed` a
 * random one is chosen and printed first; a failure prints the seed and every
 * action, and the same command with that seed replays it. `--runs K` runs K
 * sessions with seeds N, N+1, ... Exit code 1 on a failure.
 */
import { commandLine } from '../lib/cli.js';
import type { Sql } from '../../src/db/index.js';
import { BoardStore, toSnapshot } from '../../src/board/store.js';
import { randomSession } from '../../test/board/random.js';
import { browserBench } from './env.js';

const { values } = commandLine('npm run soak:board: the randomised two-person session in Chromium, as long as asked; exit code 1 on a failure', {
  actions: { type: 'string', default: '200', help: 'random actions per session' },
  seed: { type: 'string', help: 'the first session\'s seed (default: a random one, printed)' },
  runs: { type: 'string', default: '1', help: 'sessions, with seeds seed, seed+1, ...' },
});
const ACTIONS = Number(values.actions);
const SEED = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
const RUNS = Number(values.runs);

/**
 * What the board's history of the session costs (docs/board.md, "History and replay"): its rows'
 * bytes as stored (pg_column_size: jsonb, TOAST-compressed when large) plus an entry (~52 bytes) of their primary key's
 * index entries, per hour of this drawing, next to the board itself (board_elements) as the baseline.
 */
async function historyCost(sql: Sql, lessonId: string, seconds: number): Promise<void> {
  const [h] = await sql<{ ops: number; bytes: number }[]>`
    SELECT count(*)::int AS ops, coalesce(sum(pg_column_size(b.*)), 0)::int + count(*)::int * 52 AS bytes FROM board_history b WHERE lesson_id = ${lessonId}`;
  const [e] = await sql<{ bytes: number }[]>`SELECT coalesce(sum(pg_column_size(b.*)), 0)::int AS bytes FROM board_elements b WHERE lesson_id = ${lessonId}`;
  const perHour = (n: number) => Math.round((n * 3600) / seconds);
  console.log(
    `  history: ${h.ops} operations, ${h.bytes} bytes (${Math.round(h.bytes / Math.max(1, h.ops))} per operation); per hour of this drawing: ${perHour(h.ops)} operations, ${(perHour(h.bytes) / 1e6).toFixed(2)} MB (the board itself: ${e.bytes} bytes)`,
  );
}

async function main(): Promise<number> {
  const bench = await browserBench('soak_board');
  let failed = 0;
  try {
    const store = new BoardStore(bench.deps.sql);
    for (let k = 0; k < RUNS; k++) {
      const seed = SEED + k;
      console.log(`soak:board seed=${seed} actions=${ACTIONS} (replay: npm run soak:board -- --seed ${seed} --actions ${ACTIONS})`);
      const { lesson, teacher: tUrl, student: sUrl } = await bench.lesson(`soak ${seed}`);
      const a = await bench.open(tUrl);
      const b = await bench.open(sUrl);
      const t0 = performance.now();
      try {
        const out = await randomSession({
          people: [
            { page: a, url: tUrl, role: 'teacher' },
            { page: b, url: sUrl, role: 'student' },
          ],
          seed,
          actions: ACTIONS,
          // the snapshot document as GET /snapshot answers it, read from the same tables
          snapshot: async () => toSnapshot(lesson.id, await store.read(lesson.id)),
          log: process.env.SOAK_VERBOSE ? (l) => console.log(`  ${l}`) : undefined,
        });
        console.log(`  converged: ${out.elements} elements on ${out.pages} pages, ${((performance.now() - t0) / 1000).toFixed(0)} s`);
      } catch (err) {
        failed++;
        console.error(String((err as Error).message));
      }
      // what was committed, converged or not
      await historyCost(bench.deps.sql, lesson.id, (performance.now() - t0) / 1000);
      await a.context().close();
      await b.context().close();
    }
  } finally {
    await bench.close();
  }
  return failed ? 1 : 0;
}

process.exitCode = await main();
