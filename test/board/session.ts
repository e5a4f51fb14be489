import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import { startTestApi } from '../helpers/api.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { builtWeb, launchChromium } from './web.js';

/**
 * Two people on one board in Debian's Chromium, for the sync tests
 * (test/board/sync.browser.test.ts, bench/board/soak.ts): the REAL gateway
 * serving the built page, the REAL partner API for the snapshot, one database
 * and Redis. Everything a test does goes through the mouse and keyboard.
 */
export const ARTIFACTS = path.resolve('test-artifacts');

export interface BoardElementLite {
  id: string;
  page_id: string;
  type: string;
}

export async function startSession() {
  const web = builtWeb();
  const gw = await startTestGateway({ env: { WEB_DIR: web, BOARD_PREVIEW_DEBOUNCE_MS: '60000' } });
  const api = await startTestApi({ env: gw.env });
  const origin = `http://127.0.0.1:${gw.port}`;
  let browser: Browser | undefined;
  let p: PartnerFixture;

  beforeAll(async () => {
    p = await partnerFactory(gw.deps.sql);
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
  });

  /** A lesson with a teacher's and a student's link. */
  async function lesson() {
    const l = await createLesson(gw.deps.sql, p.partner, { title: 'Sync', mode: 'board_only', subject_mode: 'generic' }, new Date());
    const link = (id: string, name: string, role: 'teacher' | 'student') =>
      issueLink(gw.deps.sql, { partner: p.partner, lesson: l, input: { user: { id, name, role }, ttl_minutes: 60 }, embedBaseUrl: origin, at: new Date() });
    return { lesson: l, teacher: await link('t1', 'Anna', 'teacher'), student: await link('s1', 'Boris', 'student') };
  }

  /** Opens a link in its own browser context; resolves once the page is connected. Console errors are collected. */
  /** Opens the page and waits until the board is loaded (a person can draw), or only connected with `loaded: false`. */
  async function open(url: string, before?: (page: Page) => void | Promise<void>, opts: { loaded?: boolean } = {}): Promise<Page & { errors: string[] }> {
    const ctx = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    const page = (await ctx.newPage()) as Page & { errors: string[] };
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(String(e)));
    page.on('dialog', (d) => void d.accept());
    await before?.(page);
    await page.goto(url);
    await page.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 20_000 });
    await page.locator('[data-testid=board]').waitFor();
    if (opts.loaded !== false) await page.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 20_000 });
    return page;
  }

  /** The partner's view: GET /snapshot. */
  async function snapshot(lessonId: string): Promise<{ seq: number; pages: { id: string }[]; pinned_page_id: string | null; elements: BoardElementLite[] }> {
    const r = await api.request('GET', `/lessons/${lessonId}/snapshot`, { key: p.apiKey });
    if (r.status !== 200) throw new Error(`snapshot: ${r.status}`);
    return r.body;
  }

  return { gw, api, origin, lesson, open, snapshot };
}
