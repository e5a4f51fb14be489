import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import { readPreview, startTestApi } from '../helpers/api.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { eventually } from '../helpers/wait.js';
import { drawRect, ink, laterDrawing, showsExactly } from './actions.js';
import { startProxy } from './proxy.js';
import { builtWeb, launchChromium } from './web.js';

/**
 * The participant page in Debian's Chromium (never a downloaded browser),
 * served by the REAL gateway (startGateway with its default features) and
 * read back through the REAL partner API, both on one database and Redis.
 * The pages reach the gateway through a TCP proxy so a test can cut the
 * network. Screenshots go to test-artifacts/ (gitignored).
 *
 * Chromium must be installed (.ci/run installs it): without it these tests
 * fail with a message saying so, they are not skipped.
 */
const ARTIFACTS = path.resolve('test-artifacts');

const web = builtWeb();
const gw = await startTestGateway({ env: { WEB_DIR: web, BOARD_PREVIEW_DEBOUNCE_MS: '500' } });
const api = await startTestApi({ env: gw.env });
const proxy = await startProxy(gw.port);
const origin = `http://127.0.0.1:${proxy.port}`;

describe('the participant page in Chromium, served by the gateway', () => {
  let browser: Browser;
  let p: PartnerFixture;

  beforeAll(async () => {
    p = await partnerFactory(gw.deps.sql);
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await launchChromium({ fakeMedia: true });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
  });

  async function lessonWithLinks(mode: 'full' | 'board_only', subject: 'generic' | 'math' | 'physics') {
    const lesson = await createLesson(gw.deps.sql, p.partner, { title: subject === 'math' ? 'Algebra: quadratic equations' : 'Mechanics: forces', mode, subject_mode: subject }, new Date());
    const link = (id: string, name: string, role: 'teacher' | 'student') =>
      issueLink(gw.deps.sql, { partner: p.partner, lesson, input: { user: { id, name, role }, ttl_minutes: 60 }, embedBaseUrl: origin, at: new Date() });
    return { lesson, teacher: await link('t1', 'Anna Petrova', 'teacher'), student: await link('s1', 'Boris', 'student'), link };
  }

  /**
   * `offOrigin`: requests that left our origin (reached the network). Excalidraw lists its CDN (esm.sh)
   * after our own copy of each font; our Content-Security-Policy blocks it before any request is made
   * (Chromium reports those as CSP failures, counted in `cspViolations` and expected to be only these).
   */
  type Watched = Page & { offOrigin: string[]; cspViolations: string[] };
  const EXCALIDRAW_CDN_FONT = /^Loading the font 'https:\/\/esm\.sh\/@excalidraw\/excalidraw@[^/]+\/dist\/prod\/fonts\//;

  async function open(url: string): Promise<Watched> {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = (await ctx.newPage()) as Watched;
    page.offOrigin = [];
    page.cspViolations = [];
    const offOrigin = (url: string) => !url.startsWith(origin) && !url.startsWith('data:') && !url.startsWith('blob:');
    page.on('requestfinished', (r) => {
      if (offOrigin(r.url())) page.offOrigin.push(r.url());
    });
    page.on('requestfailed', (r) => {
      if (offOrigin(r.url()) && r.failure()?.errorText !== 'csp') page.offOrigin.push(r.url());
    });
    page.on('console', (m) => {
      if (m.text().includes('Content Security Policy') && !EXCALIDRAW_CDN_FONT.test(m.text())) page.cspViolations.push(m.text());
    });
    page.on('dialog', (d) => void d.accept());
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
  const waitElements = (page: Page, n: number) =>
    page.waitForFunction((k) => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) >= k, n, { timeout: 15_000 });
  /** The partner's view of a lesson's board: GET /snapshot. */
  const snapshotOf = async (lessonId: string) =>
    (await api.request('GET', `/lessons/${lessonId}/snapshot`, { key: p.apiKey })).body as { pages: { id: string }[]; elements: { page_id: string }[] };

  it('shows a stroke drawn in one page in the other, stores it, and the snapshot and preview show it', async () => {
    const { lesson, teacher, student } = await lessonWithLinks('board_only', 'math');
    const a = await open(teacher.url);
    const b = await open(student.url);
    await drawStroke(a, [300, 300], 300);
    await waitElements(b, 1);

    // math mode: a LaTeX formula, rendered by KaTeX in the other page too
    await a.locator('[data-testid=tool-formula]').click();
    await a.getByRole('dialog', { name: 'Formula' }).locator('textarea').fill('x_{1,2} = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}');
    await a.getByRole('button', { name: 'Insert' }).click();
    await b.locator('.overlay-formula .katex').waitFor({ timeout: 10_000 });

    // the partner reads it back through the API: snapshot and preview
    await expect.poll(async () => (await api.request('GET', `/lessons/${lesson.id}/snapshot`, { key: p.apiKey })).body.elements?.length, { timeout: 10_000 }).toBe(2);
    const snap = await api.request('GET', `/lessons/${lesson.id}/snapshot`, { key: p.apiKey });
    expect(snap.body.elements.map((e: { type: string }) => e.type).sort()).toEqual(['formula', 'freehand']);
    expect(snap.body.elements.find((e: { type: string }) => e.type === 'formula').latex).toBe('x_{1,2} = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}');
    const preview = await readPreview(api.base, lesson.id, p.apiKey);
    expect(preview.status).toBe(200);
    expect(preview.headers.get('content-type')).toBe('image/png');
    const png = Buffer.from(await preview.arrayBuffer());
    expect(png.subarray(1, 4).toString()).toBe('PNG');
    // the picture shows the board as the snapshot has it (the ETag is the board seq it was rendered from)
    expect(preview.headers.get('etag')).toBe(`"${snap.body.seq}"`);
    writeFileSync(path.join(ARTIFACTS, 'preview-math.png'), png);

    // chat both ways, participants with roles
    await b.getByLabel('Message').fill('Hello, I can see your drawing');
    await b.getByRole('button', { name: 'Send' }).click();
    await a.getByText('Hello, I can see your drawing').waitFor();
    await a.waitForFunction(() => document.querySelectorAll('[data-testid=participants] li').length === 2);
    expect(await a.locator('[data-testid=participants]').innerText()).toMatch(/Boris[\s\S]*Student/);

    await a.screenshot({ path: path.join(ARTIFACTS, 'board-teacher.png') });
    await b.screenshot({ path: path.join(ARTIFACTS, 'board-student.png') });
    for (const pg of [a, b]) {
      expect(pg.offOrigin).toEqual([]);
      expect(pg.cspViolations).toEqual([]);
    }
    await a.context().close();
    await b.context().close();
  }, 90_000);

  it('reconnects by itself after the network drops and sends what was drawn meanwhile', async () => {
    const { lesson, teacher, student } = await lessonWithLinks('board_only', 'generic');
    const a = await open(teacher.url);
    const b = await open(student.url);
    await drawStroke(a, [350, 250], 200);
    // committed, and on b's board as committed, not only as a stroke in progress (which a cut takes away)
    const committed = await eventually(async () => {
      const snap = await api.request('GET', `/lessons/${lesson.id}/snapshot`, { key: p.apiKey });
      return snap.body.elements.length === 1 && (snap.body.seq as number);
    }, 'the first stroke committed');
    await b.waitForFunction((seq) => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-seq')) >= seq, committed, { timeout: 15_000 });
    await waitElements(b, 1);
    // the network stays away until the checks below are done (a fixed cut could run out on a
    // loaded machine before the stroke is drawn)
    proxy.cut(60_000);
    await a.locator('[data-testid=connection]:not([data-state=open])').waitFor();
    await drawStroke(a, [350, 450], 250); // drawn while disconnected
    expect(await a.locator('[data-testid=connection]').getAttribute('data-state')).not.toBe('open');
    // a page cannot be added meanwhile, and the page says so instead of doing nothing
    await a.getByRole('button', { name: 'Add page' }).click();
    await a.locator('.toast', { hasText: 'Not connected' }).waitFor();
    expect(await elementsOn(b)).toBe(1);
    proxy.restore();
    await a.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 20_000 });
    await b.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 20_000 });
    await waitElements(b, 2);
    const snap = await api.request('GET', `/lessons/${lesson.id}/snapshot`, { key: p.apiKey });
    expect(snap.body.elements).toHaveLength(2);
    expect(snap.body.pages).toHaveLength(1); // nothing added behind the person's back after the reconnect
    expect(await elementsOn(a)).toBe(2);
    await a.context().close();
    await b.context().close();
  }, 90_000);

  it('moves a person whose page was deleted while they were cut off to the first page, with none of it in their undo', async () => {
    const { lesson, teacher, student } = await lessonWithLinks('board_only', 'generic');
    const a = await open(teacher.url.replace(origin, `http://127.0.0.1:${gw.port}`)); // straight to the gateway: not cut
    const b = await open(student.url);
    await a.getByRole('button', { name: 'Add page' }).click();
    await b.locator('[data-testid=page-tab-1]').click();
    await b.locator('[data-testid=page-tab-1][aria-current=page]').waitFor();
    await drawStroke(b, [400, 300], 160);
    await waitElements(a, 1);
    await b.setViewportSize({ width: 720, height: 640 }); // a small window: its board is about 400 px wide
    // cut off until the teacher's changes are stored (a fixed cut could run out first on a loaded machine)
    proxy.cut(60_000);
    await b.locator('[data-testid=connection]:not([data-state=open])').waitFor();
    await a.getByRole('button', { name: 'Delete page Page 2' }).click(); // the dialog is accepted
    await drawRect(a, [700, 450], [160, 100]); // on Page 1, beyond the student's window
    await expect.poll(async () => (await snapshotOf(lesson.id)).pages.length, { timeout: 5_000 }).toBe(1);
    await expect.poll(async () => (await snapshotOf(lesson.id)).elements.length, { timeout: 5_000 }).toBe(1);
    expect(await b.locator('[data-testid=connection]').getAttribute('data-state')).not.toBe('open');
    proxy.restore();
    await b.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 30_000 });
    await b.locator('[data-testid=page-tab-0][aria-current=page]').waitFor();
    await waitElements(b, 1);
    await expect.poll(() => ink(b), { timeout: 5_000 }).toBeGreaterThan(200); // brought into view, as on a page switch
    // the stroke went with its page: neither undo nor redo brings it onto Page 1
    await b.locator('[data-testid=page-tab-0]').click();
    await b.keyboard.press('Control+z');
    await b.keyboard.press('Control+Shift+z');
    // a later rectangle of the student's reaches the teacher: whatever the undo and redo sent went before it
    await laterDrawing(b, a, [60, 60]);
    expect(await elementsOn(b)).toBe(2);
    expect((await snapshotOf(lesson.id)).elements).toHaveLength(2);
    await a.context().close();
    await b.context().close();
  }, 90_000);

  it("lets a teacher clear the page shown, and only it, for everyone, as one step of their undo", async () => {
    const { lesson, teacher, student } = await lessonWithLinks('board_only', 'generic');
    const a = await open(teacher.url);
    const b = await open(student.url);
    const snapshot = () => snapshotOf(lesson.id);
    await drawStroke(a, [300, 300], 200);
    await a.getByRole('button', { name: 'Add page' }).click();
    await a.locator('[data-testid=page-tab-1][aria-current=page]').waitFor();
    await drawStroke(a, [300, 300], 200);
    await drawStroke(a, [300, 450], 200);
    await expect.poll(async () => (await snapshot()).elements.length, { timeout: 10_000 }).toBe(3);
    await b.locator('[data-testid=page-tab-1]').click();
    await waitElements(b, 2);
    // a student has no such item
    await b.getByTestId('main-menu-trigger').click();
    await b.getByText('Export image').waitFor();
    expect(await b.getByText('Clear this page').count()).toBe(0);
    expect(await b.getByText('Reset the canvas').count()).toBe(0);
    await b.keyboard.press('Escape');
    // the teacher's, naming the page
    const asked: string[] = [];
    a.on('dialog', (d) => void asked.push(d.message()));
    await a.getByTestId('main-menu-trigger').click();
    await a.screenshot({ path: path.join(ARTIFACTS, 'clear-page-menu.png') });
    await a.getByText('Clear this page').click();
    await showsExactly(b, 0);
    expect(asked[0]).toContain('"Page 2"');
    const [page1, page2] = (await snapshot()).pages.map((pg) => pg.id);
    expect((await snapshot()).elements.map((e) => e.page_id)).toEqual([page1]); // the other page keeps its stroke
    await a.screenshot({ path: path.join(ARTIFACTS, 'cleared-page-teacher.png') });
    await a.keyboard.press('Control+z');
    await waitElements(b, 2);
    await expect.poll(async () => (await snapshot()).elements.filter((e) => e.page_id === page2).length, { timeout: 10_000 }).toBe(2);
    await a.context().close();
    await b.context().close();
  }, 90_000);

  it('moves the student to the page the teacher pins and keeps them there until it is unpinned', async () => {
    const { teacher, student } = await lessonWithLinks('board_only', 'generic');
    const a = await open(teacher.url);
    const b = await open(student.url);
    await a.getByRole('button', { name: 'Add page' }).click();
    await b.locator('[data-testid=page-tab-1]').waitFor();
    await a.locator('[data-testid=page-tab-1]').click();
    await a.locator('[data-testid=pin]').click();
    await b.locator('[data-testid=page-tab-1].current.pinned').waitFor({ timeout: 10_000 });
    expect(await b.locator('[data-testid=page-tab-0]').isDisabled()).toBe(true);
    await b.getByText('The teacher pinned this page').waitFor();
    await b.screenshot({ path: path.join(ARTIFACTS, 'pinned-student.png') });
    await a.locator('[data-testid=unpin]').click();
    await b.waitForFunction(() => !(document.querySelector('[data-testid=page-tab-0]') as HTMLButtonElement).disabled);
    await a.context().close();
    await b.context().close();
  }, 60_000);

  it('connects a WebRTC call between two pages of a full lesson with the fake camera, and the teacher mutes the student', async () => {
    const { teacher, student } = await lessonWithLinks('full', 'physics');
    const a = await open(teacher.url);
    const b = await open(student.url);
    // each joins the call from its preview (a fresh tab asks first)
    for (const pg of [a, b]) await pg.getByTestId('join-call').click({ timeout: 20_000 });
    for (const pg of [a, b]) {
      // the peer connection is connected and the other person's (fake) camera is playing
      await pg.locator('.tile:not(.self)[data-peer-state=connected]').waitFor({ timeout: 60_000 });
      await pg.waitForFunction(
        () => [...document.querySelectorAll<HTMLVideoElement>('.tile:not(.self) video')].some((v) => v.videoWidth > 0 && v.readyState >= 2),
        null,
        { timeout: 60_000 },
      );
    }
    // the whole lesson in one picture (the README's): a drawing, chat, participants and the call
    await drawStroke(a, [260, 320], 320);
    await waitElements(b, 1);
    await a.locator('[data-testid=tool-vector]').click();
    const vec = a.getByRole('dialog', { name: 'Vector' });
    await vec.getByLabel('Magnitude').fill('10');
    await vec.getByRole('button', { name: 'Insert' }).click();
    await waitElements(b, 2);
    await a.keyboard.press('Escape'); // deselect the new vector: a clean picture
    await b.getByLabel('Message').fill('Is the force on the block 10 N?');
    await b.getByRole('button', { name: 'Send', exact: true }).click();
    await a.getByText('Is the force on the block 10 N?').waitFor();
    await a.getByLabel('Message').fill('Yes: F = m·a = 2 kg × 5 m/s²');
    await a.getByRole('button', { name: 'Send', exact: true }).click();
    await b.getByText('Yes: F = m·a = 2 kg × 5 m/s²').waitFor();
    await a.locator('[data-testid="toolbar-selection"]').click({ force: true }); // no pen style panel in the picture
    await a.screenshot({ path: path.join(ARTIFACTS, 'lesson.png') });
    // the student's microphone is on and heard by the teacher's page
    await b.locator('[data-testid=toggle-mic]', { hasText: 'Mic on' }).waitFor();
    await a.waitForFunction(() => document.querySelector<HTMLVideoElement>('.tile:not(.self) video')?.muted === false, null, { timeout: 10_000 });
    await a.screenshot({ path: path.join(ARTIFACTS, 'call-teacher.png') });

    await a.getByRole('button', { name: 'Mute', exact: true }).click();
    await b.locator('[data-testid=toggle-mic]', { hasText: 'Mic off (teacher)' }).waitFor({ timeout: 10_000 });
    expect(await b.locator('[data-testid=toggle-mic]').isDisabled()).toBe(true);
    await a.waitForFunction(() => document.querySelector<HTMLVideoElement>('.tile:not(.self) video')?.muted === true);
    await a.getByRole('button', { name: 'Allow mic' }).click();
    await b.waitForFunction(() => !(document.querySelector('[data-testid=toggle-mic]') as HTMLButtonElement).disabled, null, { timeout: 10_000 });
    await b.locator('[data-testid=toggle-mic]').click();
    await a.waitForFunction(() => document.querySelector<HTMLVideoElement>('.tile:not(.self) video')?.muted === false, null, { timeout: 10_000 });
    await a.context().close();
    await b.context().close();
  }, 120_000);

  it('removes a student: their page says so, and the link shows the removed page from then on', async () => {
    const { teacher, student } = await lessonWithLinks('board_only', 'generic');
    const a = await open(teacher.url);
    const b = await open(student.url);
    await a.waitForFunction(() => document.querySelectorAll('[data-testid=participants] li').length === 2);
    await a.getByRole('button', { name: 'Remove' }).click();
    await b.locator('[data-testid=ended]').getByText('You were removed from the lesson').waitFor({ timeout: 10_000 });
    await a.waitForFunction(() => document.querySelectorAll('[data-testid=participants] li').length === 1);
    const res = await b.goto(student.url);
    expect(res?.status()).toBe(403);
    await b.getByRole('heading', { name: 'You were removed from the lesson' }).waitFor();
    await b.screenshot({ path: path.join(ARTIFACTS, 'link-removed.png') });
    await a.context().close();
    await b.context().close();
  }, 60_000);

  it('shows a clear page for unknown, expired and archived links', async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    let res = await page.goto(`${origin}/embed/not-a-real-token-at-all-000000`);
    expect(res?.status()).toBe(401);
    await page.getByRole('heading', { name: 'This link does not work' }).waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'link-unknown.png') });

    const { lesson } = await lessonWithLinks('board_only', 'generic');
    const expired = await issueLink(gw.deps.sql, { partner: p.partner, lesson, input: { user: { id: 'late', name: 'Late', role: 'student' }, ttl_minutes: 15 }, embedBaseUrl: origin, at: new Date(Date.now() - 20 * 60_000) });
    res = await page.goto(expired.url);
    expect(res?.status()).toBe(401);
    await page.getByRole('heading', { name: 'This link has expired' }).waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'link-expired.png') });

    const live = await issueLink(gw.deps.sql, { partner: p.partner, lesson, input: { user: { id: 'x', name: 'X', role: 'student' }, ttl_minutes: 15 }, embedBaseUrl: origin, at: new Date() });
    expect((await api.request('DELETE', `/lessons/${lesson.id}`, { key: p.apiKey })).status).toBeLessThan(300);
    await expect.poll(async () => (await fetch(live.url)).status, { timeout: 15_000 }).toBe(410);
    res = await page.goto(live.url);
    expect(res?.status()).toBe(410);
    await page.getByRole('heading', { name: 'This lesson has ended' }).waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'link-archived.png') });
    await ctx.close();
  }, 60_000);

  it('serves the assets with immutable caching and compression, and the page itself uncached', async () => {
    const { student } = await lessonWithLinks('board_only', 'generic');
    const page = await fetch(student.url);
    expect(page.status).toBe(200);
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    const js = /src="(\/web\/assets\/app-[^"]+\.js)"/.exec(html)![1];
    const res = await fetch(`${origin}${js}`, { headers: { 'accept-encoding': 'br' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('content-encoding')).toBe('br');
    expect(res.headers.get('content-type')).toContain('text/javascript');
    expect((await fetch(`${origin}/web/assets/..%2f..%2fpackage.json`)).status).toBe(404);
    expect((await fetch(`${origin}/web/assets/nope-123.js`)).status).toBe(404);
  });
});
