import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { type Browser, type BrowserContextOptions, type Page } from 'playwright-core';
import { afterAll } from 'vitest';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { startTestGateway, type TestGateway } from '../realtime/helpers/gateway.js';
import { builtWeb, launchChromium } from './web.js';

/**
 * What the browser tests of the page chrome share (page-chrome, phone, call):
 * the REAL gateway serving the built page, Debian's Chromium with fake media,
 * and a page that records whatever leaves the origin and every console error.
 */
export const ARTIFACTS = path.resolve('test-artifacts');

export const PHONE: BrowserContextOptions = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 };
export const LAPTOP: BrowserContextOptions = { viewport: { width: 1280, height: 800 } };

export type Watched = Page & {
  /** requests to another origin (made or blocked), `data:` and `blob:` aside */
  offOrigin: string[];
  /** console messages of type error, and uncaught exceptions */
  errors: string[];
};

export interface PageStack {
  gw: TestGateway;
  origin: string;
  browser: () => Browser;
  partner: () => PartnerFixture;
  lesson(mode: 'full' | 'board_only', subject: 'generic' | 'math' | 'physics'): Promise<{ lessonId: string; url: (id: string, name: string, role: 'teacher' | 'student') => Promise<string> }>;
  /**
   * `init`: a script run in the page before its own (e.g. to record what the page creates). The page
   * joins a `full` lesson's call at once, as after a reload of a tab that joined it; `askToJoin`: a
   * fresh tab, which shows the camera preview and devices first.
   */
  open(url: string, options?: BrowserContextOptions, init?: () => void, opts?: { askToJoin?: boolean }): Promise<Watched>;
  /** A new lesson with its teacher (Anna Petrova) and a student (Boris) on their pages. */
  teacherAndStudent(mode: 'full' | 'board_only', subject: 'generic' | 'math' | 'physics'): Promise<{ a: Watched; b: Watched }>;
  shot(page: Page, name: string): Promise<void>;
}

/** Remote video tiles of a page whose connection is up, with video playing. */
export const liveTiles = (page: Page) =>
  page.evaluate(() => [...document.querySelectorAll<HTMLElement>('.tile:not(.self)')].filter((t) => t.dataset.peerState === 'connected' && (t.querySelector('video')?.readyState ?? 0) >= 2).length);

/** A tab that joined the call before (web/src/rtc/devices.ts keeps the choice per tab): the page joins again at once. */
export const JOINED_CALL = () => {
  if (!sessionStorage.getItem('call.choice')) sessionStorage.setItem('call.choice', JSON.stringify({ joined: true, camera: true, mic: true }));
};

/**
 * Starts the gateway and Chromium for one test file; both close after it. `env`: gateway settings
 * for this file (e.g. a smaller socket cap); `build`: which Chromium (test/board/web.ts).
 */
export async function startPageStack(env: Record<string, string> = {}, build: 'shell' | 'full' = 'shell'): Promise<PageStack> {
  const gw = await startTestGateway({ env: { WEB_DIR: builtWeb(), BOARD_PREVIEW_DEBOUNCE_MS: '500', ...env } });
  const origin = `http://127.0.0.1:${gw.port}`;
  const p = await partnerFactory(gw.deps.sql);
  mkdirSync(ARTIFACTS, { recursive: true });
  const browser = await launchChromium({ fakeMedia: true, build });
  afterAll(async () => {
    await browser.close();
  });

  return {
    gw,
    origin,
    browser: () => browser,
    partner: () => p,
    async lesson(mode, subject) {
      const lesson = await createLesson(gw.deps.sql, p.partner, { title: subject === 'math' ? 'Algebra: quadratic equations' : subject === 'physics' ? 'Mechanics: forces' : 'Drawing', mode, subject_mode: subject }, new Date());
      return {
        lessonId: lesson.id,
        url: async (id, name, role) =>
          (await issueLink(gw.deps.sql, { partner: p.partner, lesson, input: { user: { id, name, role }, ttl_minutes: 60 }, embedBaseUrl: origin, at: new Date() })).url,
      };
    },
    async open(url, options = LAPTOP, init, opts = {}) {
      const ctx = await browser.newContext(options);
      if (!opts.askToJoin) await ctx.addInitScript(JOINED_CALL);
      if (init) await ctx.addInitScript(init);
      const page = (await ctx.newPage()) as Watched;
      page.offOrigin = [];
      page.errors = [];
      const off = (u: string) => !u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('blob:');
      page.on('request', (r) => {
        if (off(r.url())) page.offOrigin.push(r.url());
      });
      page.on('console', (m) => {
        if (m.type() === 'error') page.errors.push(m.text());
      });
      page.on('pageerror', (e) => page.errors.push(`uncaught: ${e.message}`));
      page.on('dialog', (d) => void d.accept());
      await page.goto(url);
      await page.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 30_000 });
      await page.locator('[data-testid=board] canvas').first().waitFor({ timeout: 30_000 });
      // a person can draw once the board is loaded (before, the page shows it loading)
      await page.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 30_000 });
      return page;
    },
    async teacherAndStudent(mode, subject) {
      const l = await this.lesson(mode, subject);
      const a = await this.open(await l.url('t1', 'Anna Petrova', 'teacher'));
      const b = await this.open(await l.url('s1', 'Boris', 'student'));
      return { a, b };
    },
    async shot(page, name) {
      await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`) });
    },
  };
}
