import postgres from 'postgres';
import type { Browser, Page } from 'playwright-core';
import { loadConfig, type Config } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { createDeps, type Deps } from '../../src/deps.js';
import { topUp } from '../../src/domain/ledger.js';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import { createPartner } from '../../src/domain/partners.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { builtWeb, launchChromium } from '../../test/board/web.js';
import { spawnGateway, type GatewayProc } from './fanout.js';
import type { Role } from '../../src/domain/enums.js';

/**
 * A database and Redis key prefix of a bench run's own (`lessons_<kind>_<run>`,
 * `<kind>:<run>:`), migrated; `drop()` removes both. bench/board/run.ts,
 * stroke.ts and soak.ts use it.
 */
export async function benchDatabase(kind: string, env: Record<string, string> = {}): Promise<{ config: Config; deps: Deps; drop: () => Promise<void> }> {
  const base = loadConfig();
  const run = `${Date.now().toString(36)}${randomBase62(4).toLowerCase()}`;
  const name = `lessons_${kind}_${run}`;
  const url = new URL(base.DATABASE_URL);
  url.pathname = `/${name}`;
  const config = loadConfig({ ...process.env, DATABASE_URL: url.toString(), REDIS_KEY_PREFIX: `${kind.replace(/_/g, ':')}:${run}:`, LOG_LEVEL: 'silent', ...env });
  await migrate(config.DATABASE_URL);
  const deps = createDeps(config);
  return {
    config,
    deps,
    drop: async () => {
      const keys = await deps.redis.keys('*').catch(() => [] as string[]);
      if (keys.length) await deps.redis.del(...keys.map((k) => k.slice(config.REDIS_KEY_PREFIX.length)));
      await deps.close();
      const admin = new URL(base.DATABASE_URL);
      admin.pathname = '/postgres';
      const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
      await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await sql.end();
    },
  };
}

/**
 * The participant page for browser benches: a gateway process serving the
 * built page (`WEB_DIR`, else built from this tree), Debian's Chromium, and a
 * partner with minutes to issue links. `lesson()` gives a board-only lesson
 * with a teacher's and a student's link; `open()` a connected page.
 */
export async function browserBench(kind: string) {
  const db = await benchDatabase(kind);
  const { config, deps } = db;
  const web = process.env.WEB_DIR ?? builtWeb();
  const gw: GatewayProc = await spawnGateway({ DATABASE_URL: config.DATABASE_URL, REDIS_URL: config.REDIS_URL, REDIS_KEY_PREFIX: config.REDIS_KEY_PREFIX, WEB_DIR: web, BOARD_PREVIEW_DEBOUNCE_MS: '60000' });
  const browser: Browser = await launchChromium({ build: 'full' });
  const origin = `http://127.0.0.1:${gw.port}`;
  const partner = await createPartner(deps.sql, { name: kind });
  await topUp(deps.sql, { partnerId: partner.id, minutes: 100_000, at: new Date() });
  return {
    deps,
    web,
    async lesson(title: string) {
      const lesson = await createLesson(deps.sql, partner, { title, mode: 'board_only' }, new Date());
      const link = async (id: string, role: Role) =>
        (await issueLink(deps.sql, { partner, lesson, input: { user: { id, name: id, role }, ttl_minutes: 600 }, embedBaseUrl: origin, at: new Date() })).url;
      return { lesson, teacher: await link('t', 'teacher'), student: await link('s', 'student') };
    },
    async open(url: string, before?: (page: Page) => void): Promise<Page> {
      const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
      page.on('dialog', (d) => void d.accept());
      before?.(page);
      await page.goto(url);
      await page.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 30_000 });
      await page.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 30_000 });
      return page;
    },
    async close() {
      await browser.close();
      await gw.stop();
      await db.drop();
    },
  };
}
