import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueLink } from '../../src/domain/links.js';
import { createLesson } from '../../src/domain/lessons.js';
import { startDevServer, type DevServer } from '../../web/dev/server.js';
import { startTestApi } from '../helpers/api.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';

/**
 * The participant page in Debian's Chromium (never a downloaded browser),
 * against the stand-in gateway of web/dev/server.ts with the real board
 * service. Skipped where /usr/bin/chromium is not installed. Screenshots go
 * to test-artifacts/.
 */
const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = path.resolve('test-artifacts');
const api = await startTestApi();

describe.skipIf(!existsSync(CHROMIUM))('the participant page in Chromium', () => {
  let browser: Browser;
  let server: DevServer;
  let web: string;
  let p: PartnerFixture;

  beforeAll(async () => {
    web = mkdtempSync(path.join(os.tmpdir(), 'board-web-'));
    execFileSync('npx', ['tsx', 'web/build.ts'], { env: { ...process.env, WEB_OUT: web }, stdio: 'pipe' });
    server = await startDevServer(api.deps, 0, web);
    p = await partnerFactory(api.deps.sql);
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        // playwright's launch() always starts from a fresh temporary profile (its own --user-data-dir)
        '--disable-component-update', '--disable-sync',
        '--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream',
      ],
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    rmSync(web, { recursive: true, force: true });
  });

  async function lessonWithLinks(mode: 'full' | 'board_only', subject: 'generic' | 'math' | 'physics') {
    const lesson = await createLesson(api.deps.sql, p.partner, { title: subject === 'math' ? 'Algebra: quadratic equations' : 'Mechanics: forces', mode, subject_mode: subject }, new Date());
    const base = `http://127.0.0.1:${server.port}`;
    const link = (id: string, name: string, role: 'teacher' | 'student') =>
      issueLink(api.deps.sql, { partner: p.partner, lesson, input: { user: { id, name, role }, ttl_minutes: 60 }, embedBaseUrl: base, at: new Date() });
    return { lesson, teacher: await link('t1', 'Anna Petrova', 'teacher'), student: await link('s1', 'Boris', 'student') };
  }

  async function open(url: string): Promise<Page> {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await ctx.newPage();
    const blocked: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(`http://127.0.0.1:${server.port}`) && !r.url().startsWith('data:') && !r.url().startsWith('blob:')) blocked.push(r.url());
    });
    (page as Page & { offOrigin?: string[] }).offOrigin = blocked;
    await page.goto(url);
    await page.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 20_000 });
    await page.locator('[data-testid=board]').waitFor();
    return page;
  }

  async function drawStroke(page: Page, from: [number, number], dx: number) {
    await page.locator('[data-testid="toolbar-freedraw"]').click({ force: true });
    const box = (await page.locator('[data-testid=board] canvas').last().boundingBox())!;
    await page.mouse.move(box.x + from[0], box.y + from[1]);
    await page.mouse.down();
    for (let i = 1; i <= 20; i++) await page.mouse.move(box.x + from[0] + (dx * i) / 20, box.y + from[1] + Math.sin(i / 3) * 30, { steps: 2 });
    await page.mouse.up();
  }

  const elementsOn = async (page: Page) => Number(await page.locator('[data-testid=board]').getAttribute('data-elements'));

  it('shows a stroke drawn in one page in the other, stores it, and the snapshot and preview show it', async () => {
    const { lesson, teacher, student } = await lessonWithLinks('board_only', 'math');
    const a = await open(teacher.url);
    const b = await open(student.url);
    await drawStroke(a, [300, 300], 300);
    await b.waitForFunction(() => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) >= 1, null, { timeout: 10_000 });

    // math mode: a LaTeX formula, rendered by KaTeX in the other page too
    await a.locator('[data-testid=tool-formula]').click();
    await a.getByRole('dialog', { name: 'Formula' }).locator('textarea').fill('x_{1,2} = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}');
    await a.getByRole('button', { name: 'Insert' }).click();
    await b.locator('.overlay-formula .katex').waitFor({ timeout: 10_000 });

    const read = await server.board.read(lesson.id);
    expect(read.elements.map((e) => e.type).sort()).toEqual(['formula', 'freehand']);
    const snap = await api.request('GET', `/lessons/${lesson.id}/snapshot`, { key: p.apiKey });
    expect(snap.body.elements).toHaveLength(2);
    expect(snap.body.elements.find((e: { type: string }) => e.type === 'formula').latex).toBe('x_{1,2} = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}');
    const preview = await fetch(`${api.base}/api/partner/v1/lessons/${lesson.id}/preview`, { headers: { authorization: `Bearer ${p.apiKey}` } });
    expect(preview.status).toBe(200);

    // chat both ways, participants with roles
    await b.getByLabel('Message').fill('Hello, I can see your drawing');
    await b.getByRole('button', { name: 'Send' }).click();
    await a.getByText('Hello, I can see your drawing').waitFor();
    await a.waitForFunction(() => document.querySelectorAll('[data-testid=participants] li').length === 2);
    expect(await a.locator('[data-testid=participants]').innerText()).toMatch(/Boris[\s\S]*Student/);

    await a.screenshot({ path: path.join(ARTIFACTS, 'board-teacher.png') });
    await b.screenshot({ path: path.join(ARTIFACTS, 'board-student.png') });
    for (const pg of [a, b]) expect((pg as Page & { offOrigin: string[] }).offOrigin).toEqual([]);
    await a.context().close();
    await b.context().close();
  }, 90_000);

  it('reconnects by itself after the network drops and sends what was drawn meanwhile', async () => {
    const { lesson, teacher, student } = await lessonWithLinks('board_only', 'generic');
    const a = await open(teacher.url);
    const b = await open(student.url);
    await drawStroke(a, [350, 250], 200);
    await b.waitForFunction(() => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) >= 1, null, { timeout: 10_000 });
    server.dropAll(3000);
    await a.locator('[data-testid=connection]:not([data-state=open])').waitFor();
    await drawStroke(a, [350, 450], 250); // drawn while disconnected
    expect(await a.locator('[data-testid=connection]').getAttribute('data-state')).not.toBe('open');
    expect(await elementsOn(b)).toBe(1);
    await a.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 20_000 });
    await b.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 20_000 });
    await b.waitForFunction(() => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) >= 2, null, { timeout: 15_000 });
    expect((await server.board.read(lesson.id)).elements).toHaveLength(2);
    expect(await elementsOn(a)).toBe(2);
    await a.context().close();
    await b.context().close();
  }, 90_000);

  it('connects a WebRTC call between two pages of a full lesson with the fake camera', async () => {
    const { teacher, student } = await lessonWithLinks('full', 'physics');
    const a = await open(teacher.url);
    const b = await open(student.url);
    for (const pg of [a, b]) {
      await pg.waitForFunction(
        () => [...document.querySelectorAll<HTMLVideoElement>('.tile:not(.self) video')].some((v) => v.videoWidth > 0 && v.readyState >= 2),
        null,
        { timeout: 60_000 },
      );
    }
    await a.screenshot({ path: path.join(ARTIFACTS, 'call-teacher.png') });
    await a.context().close();
    await b.context().close();
  }, 90_000);

  it('shows a clear page for unknown and expired links', async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const res = await page.goto(`http://127.0.0.1:${server.port}/embed/not-a-real-token-at-all-000000`);
    expect(res?.status()).toBe(401);
    await page.getByRole('heading', { name: 'This link does not work' }).waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'link-unknown.png') });
    await ctx.close();
  });
});
