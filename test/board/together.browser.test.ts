import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { drawRect, goToPage, inkIn } from './actions.js';
import { PHONE, startPageStack, type Watched } from './browser.js';

/**
 * People together on the board, in Chromium with two and three people: each
 * other's pointers (with names, on the same page, gone when they leave), the
 * laser, following a view, and the teacher's "Everyone follow me".
 * Screenshots: test-artifacts/together-*.png.
 */
const stack = await startPageStack();

interface ShownPointer {
  id: string;
  name: string;
  tool: 'pointer' | 'laser';
  x: number;
  y: number;
  sx: number;
  sy: number;
}
const pointers = async (page: Page): Promise<ShownPointer[]> => JSON.parse((await page.locator('[data-testid=board]').getAttribute('data-pointers')) ?? '[]');
const pointerOf = (page: Page, name: string) => page.waitForFunction((n) => JSON.parse(document.querySelector('[data-testid=board]')?.getAttribute('data-pointers') ?? '[]').find((p: { name: string }) => p.name === n), name, { timeout: 10_000 });
const noPointerOf = (page: Page, name: string, timeout = 10_000) =>
  page.waitForFunction((n) => !JSON.parse(document.querySelector('[data-testid=board]')?.getAttribute('data-pointers') ?? '[]').some((p: { name: string }) => p.name === n), name, { timeout });
const viewOf = async (page: Page): Promise<{ bounds: [number, number, number, number]; zoom: number }> => JSON.parse((await page.locator('[data-testid=board]').getAttribute('data-view')) ?? 'null');
const canvasBox = async (page: Page) => (await page.locator('[data-testid=board] canvas').last().boundingBox())!;

/** Pixels of the editor's interactive canvas (cursors, laser trails, selections; transparent elsewhere) painted inside a box of canvas coordinates. */
const paintedIn = (page: Page, [x0, y0, x1, y1]: [number, number, number, number]) =>
  page.evaluate(
    ([x0, y0, x1, y1]) => {
      const c = document.querySelector<HTMLCanvasElement>('[data-testid=board] canvas.interactive')!;
      const k = c.width / c.clientWidth;
      const d = c.getContext('2d')!.getImageData(Math.round(x0 * k), Math.round(y0 * k), Math.round((x1 - x0) * k), Math.round((y1 - y0) * k)).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 100) n++;
      return n;
    },
    [x0, y0, x1, y1],
  );

async function moveOnCanvas(page: Page, x: number, y: number, steps = 4) {
  const box = await canvasBox(page);
  await page.mouse.move(box.x + x, box.y + y, { steps });
}

const followBadge = (page: Page) => page.locator('.follow-mode__badge');

async function threePeople(): Promise<{ teacher: Watched; boris: Watched; url: (id: string, name: string, role: 'teacher' | 'student') => Promise<string> }> {
  const l = await stack.lesson('board_only', 'generic');
  const teacher = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'));
  const boris = await stack.open(await l.url('s1', 'Boris', 'student'), { viewport: { width: 1000, height: 700 } });
  return { teacher, boris, url: l.url };
}

describe('pointers of the others', () => {
  it("shows the teacher's pointer with her name over the same shape at another zoom, only on her page, and no longer once she leaves the board", async () => {
    const { teacher, boris, url } = await threePeople();
    await drawRect(teacher, [300, 200], [200, 120]);
    await boris.locator('[data-testid=board][data-elements="1"]').waitFor();
    // Boris zooms in: the same scene point is elsewhere on his screen
    await moveOnCanvas(boris, 300, 300);
    await boris.keyboard.down('Control');
    for (let i = 0; i < 4; i++) await boris.mouse.wheel(0, -100);
    await boris.keyboard.up('Control');
    // zoomed in, and done zooming (the wheel's steps may still be arriving on a busy machine)
    let zoom = 0;
    await expect
      .poll(
        async () => {
          const z = (await viewOf(boris)).zoom;
          const steady = z > 1.1 && z === zoom;
          zoom = z;
          return steady;
        },
        { intervals: [250] },
      )
      .toBe(true);
    await boris.mouse.move(5, 5); // off the board: his own pointer is not what we look at

    await moveOnCanvas(teacher, 400, 200); // the middle of the rectangle's top edge
    await pointerOf(boris, 'Anna Petrova');
    expect((await pointers(boris))[0]).toMatchObject({ name: 'Anna Petrova', tool: 'pointer' });
    // drawn on the rectangle's edge as Boris sees it: ink of the rectangle and the cursor at the same spot
    // (polled with the pointer read again each time: the mouse's last steps and the zoomed canvas may
    // arrive a frame or two later on a busy machine)
    await expect
      .poll(async () => {
        const [p] = await pointers(boris);
        return (await inkIn(boris, [p.sx - 8, p.sy - 8, p.sx + 8, p.sy + 8])) > 0 && (await paintedIn(boris, [p.sx - 2, p.sy - 2, p.sx + 14, p.sy + 18])) > 20;
      })
      .toBe(true);
    await stack.shot(boris, 'together-pointer-zoomed');

    // a third person, Vera, on a phone with touch: both others see her pointer while she draws
    const vera = await stack.open(await url('s2', 'Vera', 'student'), PHONE);
    const vbox = await canvasBox(vera);
    await vera.touchscreen.tap(vbox.x + 150, vbox.y + 300);
    await pointerOf(teacher, 'Vera');
    await pointerOf(boris, 'Vera');

    // the teacher's pointer leaves the board: gone for Boris at once (not only after the idle time)
    await teacher.mouse.move(1275, 400);
    await noPointerOf(boris, 'Anna Petrova', 3000);
    // on another page: Boris (on the first page) does not see it
    await teacher.getByRole('button', { name: 'Add page' }).click();
    await teacher.locator('[data-testid=page-tab-1][aria-current=page]').waitFor();
    // every state of Boris's pointers from here on is recorded, so a pointer shown on the wrong page
    // for a moment is seen, not only one still shown when the test looks
    await boris.evaluate(() => {
      const board = document.querySelector('[data-testid=board]')!;
      const w = window as unknown as { annaShown: string[] };
      w.annaShown = [];
      new MutationObserver(() => {
        if ((board.getAttribute('data-pointers') ?? '').includes('Anna Petrova')) w.annaShown.push(document.querySelector('.page-tab-wrap.current')?.getAttribute('data-page-id') ?? '?');
      }).observe(board, { attributes: true, attributeFilter: ['data-pointers'] });
    });
    await moveOnCanvas(teacher, 400, 300);
    await goToPage(boris, 1);
    // the teacher's later move reaches Boris once he is on her page: her earlier ones were relayed before it
    await moveOnCanvas(teacher, 420, 310);
    await pointerOf(boris, 'Anna Petrova');
    const shownOn = await boris.evaluate(() => (window as unknown as { annaShown: string[] }).annaShown);
    const borisPage = await boris.evaluate(() => document.querySelector('.page-tab-wrap.current')?.getAttribute('data-page-id'));
    expect(shownOn.length).toBeGreaterThan(0);
    expect(new Set(shownOn)).toEqual(new Set([borisPage]));

    // Vera closes her tab: her pointer goes for everyone with her presence
    await vera.context().close();
    await noPointerOf(teacher, 'Vera');
    expect(teacher.errors).toEqual([]);
    expect(boris.errors).toEqual([]);
    await teacher.context().close();
    await boris.context().close();
  }, 180_000);

  it('draws the others\' pointers again only when one moves, and asks for no animation frame while they are still', async () => {
    const { teacher, boris } = await threePeople();
    await boris.mouse.move(5, 5);
    // how often Boris's page draws the editor's pointer layer (its interactive canvas) and hands pointers to it, over 30 of its frames
    const drawsOver30Frames = () =>
      boris.evaluate(async () => {
        const proto = CanvasRenderingContext2D.prototype;
        const clear = proto.clearRect;
        let draws = 0;
        proto.clearRect = function (...a: Parameters<typeof clear>) {
          if (this.canvas.classList.contains('interactive')) draws++;
          return clear.apply(this, a);
        };
        const board = document.querySelector('[data-testid=board]')!;
        const handedAt = board.getAttribute('data-pointers-at');
        for (let i = 0; i < 30; i++) await new Promise(requestAnimationFrame);
        proto.clearRect = clear;
        const shown = JSON.parse(board.getAttribute('data-pointers') ?? '[]').some((p: { name: string }) => p.name === 'Anna Petrova');
        return { draws, handed: board.getAttribute('data-pointers-at') !== handedAt, shown };
      });
    // while the teacher moves, her pointer is drawn anew as it goes
    await moveOnCanvas(teacher, 300, 300);
    await pointerOf(boris, 'Anna Petrova');
    const box = await canvasBox(teacher);
    let still = false;
    const moving = (async () => {
      for (let i = 0; !still; i++) await teacher.mouse.move(box.x + 300 + (i % 40) * 3, box.y + 300);
    })();
    const during = await drawsOver30Frames();
    still = true;
    await moving;
    expect(during.draws).toBeGreaterThan(0);
    expect(during.handed).toBe(true);
    // she stops, her pointer still shown: nothing is drawn or handed to the editor again
    await expect.poll(async () => { const w = await drawsOver30Frames(); return w.shown && w.draws === 0 && !w.handed; }, { timeout: 4000 }).toBe(true);
    // and the page asks for no animation frame at all: an idle board costs a phone's battery nothing
    const framesAskedIn1s = () =>
      boris.evaluate(async () => {
        const raf = window.requestAnimationFrame;
        let asked = 0;
        window.requestAnimationFrame = (cb) => (asked++, raf(cb));
        await new Promise((r) => setTimeout(r, 1000));
        window.requestAnimationFrame = raf;
        return asked;
      });
    expect(await framesAskedIn1s()).toBe(0);
    await teacher.context().close();
    await boris.context().close();
  }, 120_000);

  it("shows the teacher's laser trail on the student's screen, fading as it does locally", async () => {
    const { teacher, boris } = await threePeople();
    await boris.mouse.move(5, 5);
    await teacher.locator('[data-testid=board] canvas').last().click({ position: { x: 600, y: 600 } });
    await teacher.keyboard.press('k'); // the editor's laser pointer
    await moveOnCanvas(teacher, 200, 250);
    await teacher.mouse.down();
    for (let i = 1; i <= 12; i++) await moveOnCanvas(teacher, 200 + i * 30, 250 + Math.sin(i / 2) * 40, 2);
    const trail = await boris.waitForFunction(() => JSON.parse(document.querySelector('[data-testid=board]')?.getAttribute('data-pointers') ?? '[]').find((p: { tool: string }) => p.tool === 'laser'));
    expect(await trail.jsonValue()).toMatchObject({ name: 'Anna Petrova' });
    // the trail: painted along the path on Boris's screen, not only at the pointer's tip
    const [p] = await pointers(boris);
    const beside = async () => (await paintedIn(boris, [0, 0, 1000, 640])) - (await paintedIn(boris, [Math.max(0, p.sx - 30), Math.max(0, p.sy - 30), p.sx + 80, p.sy + 40]));
    await expect.poll(beside, { timeout: 3000 }).toBeGreaterThan(100);
    await stack.shot(boris, 'together-laser');
    await teacher.mouse.up();
    await teacher.mouse.move(1275, 400);
    // the trail fades: nothing left of it a moment after the button went up
    await expect.poll(() => paintedIn(boris, [0, 0, 900, 600]), { timeout: 5000 }).toBe(0);
    await teacher.context().close();
    await boris.context().close();
  }, 180_000);
});

describe("following someone's view", () => {
  it("follows the teacher's view on a click on her name, across a zoom and a page switch, until Esc", async () => {
    const { teacher, boris } = await threePeople();
    await drawRect(teacher, [300, 200], [200, 120]);
    await boris.locator('[data-testid=participants]').getByRole('button', { name: 'Anna Petrova' }).click();
    await expect(followBadge(boris).textContent()).resolves.toContain('Following');
    await expect.poll(() => followBadge(boris).textContent()).toContain('Anna Petrova');

    // the teacher zooms in on the rectangle: Boris sees the same part of the board, fitted into his smaller window
    for (let i = 0; i < 3; i++) await teacher.locator('.zoom-in-button').click();
    const fits = async () => {
      const t = (await viewOf(teacher))!.bounds;
      const b = (await viewOf(boris))!.bounds;
      const [tcx, tcy] = [(t[0] + t[2]) / 2, (t[1] + t[3]) / 2];
      const [bcx, bcy] = [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2];
      const w = t[2] - t[0];
      // same centre, and all of the teacher's width (the narrower side fits) within his
      return Math.abs(tcx - bcx) < w * 0.05 && Math.abs(tcy - bcy) < w * 0.05 && b[0] <= t[0] + 2 && b[2] >= t[2] - 2;
    };
    await expect.poll(fits, { timeout: 5000 }).toBe(true);
    expect((await viewOf(boris))!.zoom).not.toBe((await viewOf(teacher))!.zoom);
    await stack.shot(boris, 'together-follow-zoom');

    // her page switch takes him along
    await teacher.getByRole('button', { name: 'Add page' }).click();
    await teacher.locator('[data-testid=page-tab-1][aria-current=page]').waitFor();
    await boris.locator('[data-testid=page-tab-1][aria-current=page]').waitFor({ timeout: 5000 });
    await teacher.mouse.wheel(300, 200);
    await expect.poll(fits, { timeout: 5000 }).toBe(true);
    // the teacher sees who follows her
    await expect.poll(() => teacher.locator('[data-testid=followers]').textContent()).toContain('Boris');

    await boris.keyboard.press('Escape');
    await followBadge(boris).waitFor({ state: 'detached' });
    await teacher.locator('[data-testid=followers]').waitFor({ state: 'detached' });
    await teacher.context().close();
    await boris.context().close();
  }, 180_000);

  it("follows a person on a click or a tap on their pointer's name label, until the badge's stop", async () => {
    const { teacher, boris, url } = await threePeople();
    const vera = await stack.open(await url('s2', 'Vera', 'student'), PHONE);
    await boris.mouse.move(5, 5);
    await moveOnCanvas(teacher, 200, 300);
    await pointerOf(boris, 'Anna Petrova');
    await pointerOf(vera, 'Anna Petrova');
    // Boris clicks her name under her pointer: he follows her
    const [p] = await pointers(boris);
    const box = await canvasBox(boris);
    await boris.mouse.click(box.x + p.sx + 20, box.y + p.sy + 24);
    await expect.poll(() => followBadge(boris).textContent()).toContain('Anna Petrova');
    await expect.poll(() => teacher.locator('[data-testid=followers]').textContent()).toContain('Boris');
    await stack.shot(boris, 'together-follow-label');
    // Vera taps it on her phone
    const [q] = (await pointers(vera)).filter((x) => x.name === 'Anna Petrova');
    const vbox = await canvasBox(vera);
    await vera.touchscreen.tap(vbox.x + q.sx + 20, vbox.y + q.sy + 24);
    await expect.poll(() => followBadge(vera).textContent()).toContain('Anna Petrova');
    await expect.poll(() => teacher.locator('[data-testid=followers]').textContent()).toMatch(/Boris.*Vera|Vera.*Boris/);
    await stack.shot(vera, 'together-follow-label-phone');
    // the editor's own stop button on the badge ends it
    await boris.locator('.follow-mode__disconnect-btn').click();
    await followBadge(boris).waitFor({ state: 'detached' });
    await expect.poll(() => teacher.locator('[data-testid=followers]').textContent()).not.toContain('Boris');
    expect(boris.errors).toEqual([]);
    expect(vera.errors).toEqual([]);
    for (const pg of [teacher, boris, vera]) await pg.context().close();
  }, 180_000);

  it('makes every student follow the teacher, a late joiner on a phone too; a student steps out and comes back', async () => {
    const { teacher, boris, url } = await threePeople();
    await teacher.getByRole('button', { name: 'Everyone follow me' }).click();
    await expect.poll(() => followBadge(boris).textContent()).toContain('Anna Petrova');
    for (let i = 0; i < 2; i++) await teacher.locator('.zoom-in-button').click();

    const vera = await stack.open(await url('s2', 'Vera', 'student'), PHONE);
    await expect.poll(() => followBadge(vera).textContent()).toContain('Anna Petrova');
    // the laptop teacher's view fitted into the phone: her width fills his narrow screen
    await expect
      .poll(async () => {
        const t = (await viewOf(teacher))!.bounds;
        const v = (await viewOf(vera))?.bounds;
        return !!v && Math.abs((t[0] + t[2]) / 2 - (v[0] + v[2]) / 2) < 20 && v[0] <= t[0] + 2 && v[2] >= t[2] - 2;
      }, { timeout: 5000 })
      .toBe(true);
    await stack.shot(vera, 'together-phone-follows-teacher');
    await expect.poll(() => teacher.locator('[data-testid=followers]').textContent()).toMatch(/Boris.*Vera|Vera.*Boris/);

    // Boris pans on his own: he stops following and may go back
    await moveOnCanvas(boris, 400, 300);
    await boris.mouse.wheel(0, 300);
    await followBadge(boris).waitFor({ state: 'detached' });
    await boris.getByRole('button', { name: 'Back to the teacher' }).click();
    await expect.poll(() => followBadge(boris).textContent()).toContain('Anna Petrova');

    // the teacher stops: nobody follows any more
    await teacher.getByRole('button', { name: 'Stop: everyone follows me' }).click();
    await followBadge(boris).waitFor({ state: 'detached' });
    await followBadge(vera).waitFor({ state: 'detached' });
    expect(boris.errors).toEqual([]);
    expect(vera.errors).toEqual([]);
    for (const p of [teacher, boris, vera]) await p.context().close();
  }, 180_000);
});

describe('pages as people expect', () => {
  it("keeps each page's own view, renames a page on its tab and lets the teacher reorder pages by dragging", async () => {
    const { teacher, boris } = await threePeople();
    const zoom = async () => (await viewOf(teacher)).zoom;
    for (let i = 0; i < 2; i++) await teacher.locator('.zoom-in-button').click();
    await expect.poll(zoom).toBeGreaterThan(1.15);
    const first = await viewOf(teacher);
    await teacher.getByRole('button', { name: 'Add page' }).click();
    await teacher.locator('[data-testid=page-tab-1][aria-current=page]').waitFor();
    for (let i = 0; i < 4; i++) await teacher.locator('.zoom-out-button').click();
    await expect.poll(zoom).toBeLessThan(1);
    const second = await viewOf(teacher);
    await goToPage(teacher, 0);
    await expect.poll(() => viewOf(teacher)).toEqual(first);
    await goToPage(teacher, 1);
    await expect.poll(() => viewOf(teacher)).toEqual(second);

    // renamed in place: no browser prompt
    let prompted = false;
    teacher.on('dialog', () => (prompted = true));
    await teacher.locator('[data-testid=page-tab-1]').dblclick();
    await teacher.locator('[data-testid=page-rename-1]').fill('Forces');
    await stack.shot(teacher, 'together-rename-in-place');
    await teacher.keyboard.press('Enter');
    await boris.locator('[data-testid=page-tab-1]', { hasText: 'Forces' }).waitFor();
    expect(prompted).toBe(false);

    // the teacher drags "Forces" before "Page 1": everyone's tabs follow
    await teacher.locator('[data-testid=page-tab-wrap-1]').dragTo(teacher.locator('[data-testid=page-tab-wrap-0]'));
    await boris.locator('[data-testid=page-tab-0]', { hasText: 'Forces' }).waitFor();
    await teacher.locator('[data-testid=page-tab-1]', { hasText: 'Page 1' }).waitFor();
    await stack.shot(boris, 'together-reordered');
    expect(teacher.errors).toEqual([]);
    await teacher.context().close();
    await boris.context().close();
  }, 180_000);

  it('lets a teacher on a phone reorder pages by holding a tab and sliding it, while a tap still opens a page', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const teacher = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'), PHONE);
    const boris = await stack.open(await l.url('s1', 'Boris', 'student'));
    await teacher.getByRole('button', { name: 'Add page' }).tap();
    await teacher.locator('[data-testid=page-tab-1][aria-current=page]').waitFor();
    await boris.locator('[data-testid=page-tab-1]', { hasText: 'Page 2' }).waitFor();
    const centre = async (i: number) => {
      const b = (await teacher.locator(`[data-testid=page-tab-wrap-${i}]`).boundingBox())!;
      return [b.x + b.width / 2, b.y + b.height / 2] as const;
    };
    const [fx, fy] = await centre(1);
    const [tx] = await centre(0);
    // the finger, as the phone's touch screen sends it (Chromium's input pipeline: touch and pointer events)
    const cdp = await teacher.context().newCDPSession(teacher);
    const finger = (type: 'touchStart' | 'touchMove' | 'touchEnd', x: number, y: number) =>
      cdp.send('Input.dispatchTouchEvent', { type, touchPoints: type === 'touchEnd' ? [] : [{ x, y }] });
    await finger('touchStart', fx, fy);
    // held: the tab lifts; then slid onto "Page 1"
    await teacher.locator('[data-testid=page-tab-wrap-1][data-lifted=true]').waitFor();
    for (let i = 1; i <= 6; i++) await finger('touchMove', fx + ((tx - fx) * i) / 6, fy);
    await teacher.locator('[data-testid=page-tab-wrap-0].drop-target').waitFor();
    await stack.shot(teacher, 'together-reorder-touch');
    await finger('touchEnd', tx, fy);
    await boris.locator('[data-testid=page-tab-0]', { hasText: 'Page 2' }).waitFor();
    await teacher.locator('[data-testid=page-tab-0]', { hasText: 'Page 2' }).waitFor();
    expect(await teacher.locator('[data-lifted]').count()).toBe(0);
    // a short tap is not a drag: it opens the page, the order stays
    await teacher.locator('[data-testid=page-tab-1]').tap();
    await teacher.locator('[data-testid=page-tab-1][aria-current=page]', { hasText: 'Page 1' }).waitFor();
    expect(await teacher.locator('[data-testid=page-tab-0]').textContent()).toContain('Page 2');
    expect(teacher.errors).toEqual([]);
    await teacher.context().close();
    await boris.context().close();
  }, 120_000);
});
