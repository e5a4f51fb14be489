import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import { startTestApi } from '../helpers/api.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { builtWeb } from './web.js';

/**
 * Two people on one board in Debian's Chromium, for the sync tests
 * (test/board/sync.browser.test.ts, bench/board/soak.ts): the REAL gateway
 * serving the built page, the REAL partner API for the snapshot, one database
 * and Redis. Everything a test does goes through the mouse and keyboard.
 */
export const CHROMIUM = '/usr/bin/chromium';
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
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; .ci/run does it)`);
    p = await partnerFactory(gw.deps.sql);
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
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
  async function open(url: string, before?: (page: Page) => void): Promise<Page & { errors: string[] }> {
    const ctx = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    const page = (await ctx.newPage()) as Page & { errors: string[] };
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(String(e)));
    page.on('dialog', (d) => void d.accept());
    before?.(page);
    await page.goto(url);
    await page.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 20_000 });
    await page.locator('[data-testid=board]').waitFor();
    return page;
  }

  /** The partner's view: GET /snapshot. */
  async function snapshot(lessonId: string): Promise<{ seq: number; pages: { id: string }[]; elements: BoardElementLite[] }> {
    const r = await api.request('GET', `/lessons/${lessonId}/snapshot`, { key: p.apiKey });
    if (r.status !== 200) throw new Error(`snapshot: ${r.status}`);
    return r.body;
  }

  return { gw, api, origin, lesson, open, snapshot };
}

async function canvasBox(page: Page) {
  return (await page.locator('[data-testid=board] canvas').last().boundingBox())!;
}

/** Draws a freehand stroke with the mouse, `points` moves long, starting at `from` (canvas coordinates). */
export async function drawStroke(page: Page, from: [number, number], dx: number, points = 20) {
  await page.locator('[data-testid="toolbar-freedraw"]').click({ force: true });
  const box = await canvasBox(page);
  await page.mouse.move(box.x + from[0], box.y + from[1]);
  await page.mouse.down();
  for (let i = 1; i <= points; i++) await page.mouse.move(box.x + from[0] + (dx * i) / points, box.y + from[1] + Math.sin(i / 3) * 30);
  await page.mouse.up();
}

/** Draws a rectangle by dragging; the editor selects it afterwards. */
export async function drawRect(page: Page, from: [number, number], size: [number, number]) {
  await page.locator('[data-testid="toolbar-rectangle"]').click({ force: true });
  const box = await canvasBox(page);
  await page.mouse.move(box.x + from[0], box.y + from[1]);
  await page.mouse.down();
  await page.mouse.move(box.x + from[0] + size[0] / 2, box.y + from[1] + size[1] / 2, { steps: 3 });
  await page.mouse.move(box.x + from[0] + size[0], box.y + from[1] + size[1], { steps: 3 });
  await page.mouse.up();
}

/** Clicks at a canvas point with the selection tool (selects what is there). */
export async function clickAt(page: Page, at: [number, number]) {
  await page.locator('[data-testid="toolbar-selection"]').click({ force: true });
  const box = await canvasBox(page);
  await page.mouse.click(box.x + at[0], box.y + at[1]);
}

/** Elements the page's editor shows (not deleted) on its current page. */
export const shown = async (page: Page) => Number(await page.locator('[data-testid=board]').getAttribute('data-elements'));

/** Waits until the page shows exactly `n` elements. */
export const showsExactly = (page: Page, n: number, timeout = 15_000) =>
  page.waitForFunction((k) => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) === k, n, { timeout });

/** Goes to the i-th page tab. */
export async function goToPage(page: Page, i: number) {
  await page.locator(`[data-testid=page-tab-${i}]`).click();
  await page.locator(`[data-testid=page-tab-${i}].current`).waitFor();
}

/** Ids of the elements the page's editor shows on its current page, sorted. */
export const shownIds = async (page: Page) => ((await page.locator('[data-testid=board]').getAttribute('data-ids')) ?? '').split(' ').filter(Boolean).sort();
