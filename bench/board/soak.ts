/**
 * `npm run soak:board -- --actions 200 --seed N`: the randomised two-person
 * session (test/board/random.ts) for as long as asked, against a real gateway
 * process serving the built page, in Debian's Chromium. Without `--seed` a
 * random one is chosen and printed first; a failure prints the seed and every
 * action, and the same command with that seed replays it. `--runs K` runs K
 * sessions with seeds N, N+1, ... Exit code 1 on a failure.
 */
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { chromium, type Browser, type Page } from 'playwright-core';
import { BoardStore, toSnapshot } from '../../src/board/store.js';
import { loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { createDeps } from '../../src/deps.js';
import { topUp } from '../../src/domain/ledger.js';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import { createPartner } from '../../src/domain/partners.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { randomSession } from '../../test/board/random.js';
import { builtWeb } from '../../test/board/web.js';
import { spawnGateway } from './fanout.js';

const { values } = parseArgs({ options: { actions: { type: 'string', default: '200' }, seed: { type: 'string' }, runs: { type: 'string', default: '1' } } });
const ACTIONS = Number(values.actions);
const SEED = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
const RUNS = Number(values.runs);

async function open(browser: Browser, url: string): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  page.on('dialog', (d) => void d.accept());
  await page.goto(url);
  await page.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 30_000 });
  return page;
}

async function main(): Promise<number> {
  const base = loadConfig();
  const run = `${Date.now().toString(36)}${randomBase62(4).toLowerCase()}`;
  const url = new URL(base.DATABASE_URL);
  url.pathname = `/lessons_soak_board_${run}`;
  const config = loadConfig({ ...process.env, DATABASE_URL: url.toString(), REDIS_KEY_PREFIX: `soak:board:${run}:`, LOG_LEVEL: 'silent' });
  await migrate(config.DATABASE_URL);
  const deps = createDeps(config);
  const gw = await spawnGateway({ DATABASE_URL: config.DATABASE_URL, REDIS_URL: config.REDIS_URL, REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX, WEB_DIR: process.env.WEB_DIR ?? builtWeb() });
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
  const origin = `http://127.0.0.1:${gw.port}`;
  let failed = 0;
  try {
    const partner = await createPartner(deps.sql, { name: 'soak' });
    await topUp(deps.sql, { partnerId: partner.id, minutes: 100_000, at: new Date() });
    const store = new BoardStore(deps.sql);
    for (let k = 0; k < RUNS; k++) {
      const seed = SEED + k;
      console.log(`soak:board seed=${seed} actions=${ACTIONS} (replay: npm run soak:board -- --seed ${seed} --actions ${ACTIONS})`);
      const lesson = await createLesson(deps.sql, partner, { title: `soak ${seed}`, mode: 'board_only' }, new Date());
      const link = async (id: string, role: 'teacher' | 'student') =>
        (await issueLink(deps.sql, { partner, lesson, input: { user: { id, name: id, role }, ttl_minutes: 600 }, embedBaseUrl: origin, at: new Date() })).url;
      const [tUrl, sUrl] = [await link('t', 'teacher'), await link('s', 'student')];
      const a = await open(browser, tUrl);
      const b = await open(browser, sUrl);
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
      await a.context().close();
      await b.context().close();
    }
  } finally {
    await browser.close();
    await gw.stop();
    const keys = await deps.redis.keys('*').catch(() => [] as string[]);
    if (keys.length) await deps.redis.del(...keys.map((k) => k.slice(config.REDIS_KEY_PREFIX.length)));
    await deps.close();
    const admin = new URL(base.DATABASE_URL);
    admin.pathname = '/postgres';
    const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
    await sql.unsafe(`DROP DATABASE IF EXISTS "lessons_soak_board_${run}" WITH (FORCE)`);
    await sql.end();
  }
  return failed ? 1 : 0;
}

process.exitCode = await main();
