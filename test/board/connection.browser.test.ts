import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApi } from '../helpers/api.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { suiteOrFull } from '../helpers/length.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { drawStroke, showsExactly } from './actions.js';
import { startProxy } from './proxy.js';
import { builtWeb, launchChromium } from './web.js';

/**
 * The page's connection when the network goes away for long, or the link
 * ends while it is away (web/src/net/connection.ts). The pages reach the
 * gateway through a TCP proxy that drops and refuses connections for a while
 * (`cut`); the gateway's clock is injected, so a link can expire mid-lesson.
 * Before: after 8 failed attempts (about 45 s) the page reloaded itself, which
 * offline lands on the browser's error page and loses what was drawn; and a
 * link that expired meanwhile showed "retrying" until then.
 */
const clock = new ManualClock(new Date());
const gw = await startTestGateway({ clock, env: { WEB_DIR: builtWeb(), BOARD_PREVIEW_DEBOUNCE_MS: '500' } });
const api = await startTestApi({ env: gw.env, clock });
const proxy = await startProxy(gw.port);
const origin = `http://127.0.0.1:${proxy.port}`;
/**
 * How long the network is away in the first test. The suite cuts 15 s (about
 * four failed attempts, the address probed from the second); the full length
 * (`npm run test:full`, or this file alone with `npm run test:outage`) cuts a
 * minute, well past the first 8 attempts (about 45 s), to show the page keeps
 * retrying without reloading itself.
 */
const OUTAGE_MS = suiteOrFull(15_000, 60_000);

describe('the page when the network goes away', () => {
  let browser: Browser;
  let p: PartnerFixture;

  beforeAll(async () => {
    p = await partnerFactory(gw.deps.sql);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
  });

  async function lessonWithLinks() {
    const lesson = await createLesson(gw.deps.sql, p.partner, { title: 'Geometry', mode: 'board_only', subject_mode: 'generic' }, clock.now());
    const link = (id: string, name: string, role: 'teacher' | 'student') =>
      issueLink(gw.deps.sql, { partner: p.partner, lesson, input: { user: { id, name, role }, ttl_minutes: 15 }, embedBaseUrl: origin, at: clock.now() });
    return { lesson, teacher: await link('t1', 'Anna Petrova', 'teacher'), student: await link('s1', 'Boris', 'student') };
  }

  /** A page that counts its navigations after the first (a reload is one). */
  async function open(url: string): Promise<Page & { navigations: number }> {
    const page = (await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage()) as Page & { navigations: number };
    page.navigations = -1;
    page.on('framenavigated', (f) => {
      if (f === page.mainFrame()) page.navigations++;
    });
    await page.goto(url);
    await page.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 20_000 });
    return page;
  }

  it(`keeps retrying through ${OUTAGE_MS / 1000} s without network, never reloads, and sends what was drawn meanwhile`, async () => {
    const { lesson, teacher, student } = await lessonWithLinks();
    const a = await open(teacher.url);
    const b = await open(`http://127.0.0.1:${gw.port}${new URL(student.url).pathname}`); // straight to the gateway: not cut
    await drawStroke(a, [350, 250], 200);
    await showsExactly(b, 1);
    proxy.cut(OUTAGE_MS);
    await a.locator('[data-testid=connection]:not([data-state=open])').waitFor();
    await drawStroke(a, [350, 450], 250); // drawn offline
    await a.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: OUTAGE_MS + 30_000 });
    await showsExactly(b, 2);
    expect(a.navigations).toBe(0);
    const snap = await api.request('GET', `/lessons/${lesson.id}/snapshot`, { key: p.apiKey });
    expect(snap.body.elements).toHaveLength(2);
    await a.context().close();
    await b.context().close();
  }, OUTAGE_MS + 90_000);

  it('says the link has expired when it expired during a network drop, instead of retrying', async () => {
    const { student } = await lessonWithLinks();
    const b = await open(student.url);
    clock.advance(16 * 60_000); // past the link's 15 minutes: it stays valid for the socket already in
    proxy.cut(3000);
    await b.getByRole('heading', { name: 'This link has expired' }).waitFor({ timeout: 15_000 });
    expect(b.navigations).toBe(0);
    await b.context().close();
  }, 60_000);
});
