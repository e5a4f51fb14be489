import { describe, expect, it } from 'vitest';
import { LAPTOP, PHONE, startPageStack, type Watched } from './browser.js';

/**
 * The page never leads a participant, or their entry token, off our origin:
 * no request to another origin, no link to one in anything a person can open
 * (the main menu, the library, help), and a clean console on load (Excalidraw's
 * CDN font fallbacks would log ~230 CSP errors). Chromium against the real gateway.
 */
const stack = await startPageStack();

/** Every link in the document that leads off the origin (or to another scheme). */
const offsiteLinks = (page: Watched) =>
  page.evaluate(() =>
    [...document.querySelectorAll<HTMLAnchorElement>('a[href], area[href]')]
      .map((a) => a.href)
      .filter((h) => !h.startsWith(location.origin + '/') && !h.startsWith('#')),
  );

describe('the participant page stays on its origin', () => {
  it('loads with no console error, and no request or link leaves the origin from the menu, the library or help', async () => {
    const l = await stack.lesson('board_only', 'math');
    const page = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'));
    // every font the editor uses is loaded from the bundle (Excalidraw's fallback is a CDN)
    await page.locator('[data-testid="toolbar-text"]').click({ force: true }); // text: Excalidraw loads its text fonts
    const box = (await page.locator('[data-testid=board] canvas').last().boundingBox())!;
    await page.mouse.click(box.x + 300, box.y + 300);
    await page.keyboard.type('Hello');
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-elements')) === 1);
    await page.evaluate(() => document.fonts.ready);

    // the main menu: ours, without GitHub, X or Discord
    await page.getByTestId('main-menu-trigger').click();
    const menu = page.locator('.main-menu, .dropdown-menu').first();
    await menu.waitFor();
    await stack.shot(page, 'chrome-main-menu');
    const items = await menu.innerText();
    expect(items).toMatch(/Export image/);
    expect(items).toMatch(/Help/);
    expect(items).not.toMatch(/GitHub|Follow us|Discord|Excalidraw\+|Sign up|Live collaboration/i);
    expect(await offsiteLinks(page)).toEqual([]);

    // help, from the menu: its documentation, blog and GitHub links are gone
    await menu.getByText('Help').click();
    await page.locator('.HelpDialog').waitFor();
    await stack.shot(page, 'chrome-help');
    expect(await offsiteLinks(page)).toEqual([]);
    await page.locator('.Modal__background').click({ position: { x: 5, y: 5 } }); // outside the dialog
    await page.locator('.HelpDialog').waitFor({ state: 'detached' });

    // the library: no "Browse libraries" (its URL carried location.href, the entry token)
    await page.locator('.default-sidebar-trigger').click();
    await page.locator('.layer-ui__library, .library-menu-items-container, .sidebar').first().waitFor();
    await stack.shot(page, 'chrome-library');
    expect(await page.getByText('Browse libraries').isVisible()).toBe(false);
    expect(await offsiteLinks(page)).toEqual([]);

    expect(page.offOrigin).toEqual([]);
    expect(page.errors).toEqual([]);
    await page.context().close();
  }, 120_000);

  it('turns a link to another origin into plain text wherever it appears, and leaves links of its own origin alone', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const page = await stack.open(await l.url('s1', 'Boris', 'student'));
    const after = await page.evaluate(async () => {
      const box = document.createElement('div');
      box.innerHTML = '<a id="out" href="https://example.com/?r=x" target="_blank">out</a><a id="mail" href="mailto:a@b.c">mail</a><a id="own" href="/web/assets/x">own</a>';
      document.body.appendChild(box);
      const late = document.createElement('a');
      box.appendChild(late);
      late.setAttribute('href', 'https://evil.example/'); // an href set after insertion
      await new Promise((r) => setTimeout(r, 50));
      return { out: document.getElementById('out')!.getAttribute('href'), mail: document.getElementById('mail')!.getAttribute('href'), own: document.getElementById('own')!.getAttribute('href'), late: late.getAttribute('href'), text: box.textContent };
    });
    expect(after).toEqual({ out: null, mail: null, own: '/web/assets/x', late: null, text: 'outmailown' });
    await page.context().close();
  }, 60_000);
});

/** WCAG 2 contrast of an element's text against the background it is drawn on (ancestors' colours, alpha blended over white). */
async function contrast(page: Watched, selector: string): Promise<number> {
  return page.locator(selector).first().evaluate((el) => {
    const rgba = (c: string) => (c.match(/[\d.]+/g) ?? []).map(Number).concat([1]).slice(0, 4) as [number, number, number, number];
    const layers: [number, number, number, number][] = [];
    for (let e: Element | null = el; e; e = e.parentElement) {
      const bg = rgba(getComputedStyle(e).backgroundColor);
      if (bg[3] > 0) layers.push(bg);
      if (bg[3] >= 1) break;
    }
    let back: number[] = [255, 255, 255];
    for (const [r, g, b, a] of layers.reverse()) back = [r * a + back[0] * (1 - a), g * a + back[1] * (1 - a), b * a + back[2] * (1 - a)];
    const [fr, fg, fb, fa] = rgba(getComputedStyle(el).color);
    const opacity = Number(getComputedStyle(el).opacity);
    const alpha = fa * opacity;
    const fore = [fr * alpha + back[0] * (1 - alpha), fg * alpha + back[1] * (1 - alpha), fb * alpha + back[2] * (1 - alpha)];
    const lum = (c: number[]) => {
      const [r, g, b] = c.map((v) => v / 255).map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const [hi, lo] = [lum(fore), lum(back)].sort((x, y) => y - x);
    return Math.round(((hi + 0.05) / (lo + 0.05)) * 100) / 100;
  });
}

describe('small things people notice', () => {
  it('keeps a chat line the rate limit refused in the input, and sends it once the person tries again', async () => {
    const l = await stack.lesson('board_only', 'generic');
    // the page's socket, recorded so the test can use up the connection's chat allowance
    const page = await stack.open(await l.url('s1', 'Boris', 'student'), LAPTOP, () => {
      const Native = window.WebSocket;
      window.WebSocket = class extends Native {
        constructor(url: string | URL, protocols?: string | string[]) {
          super(url, protocols);
          (window as unknown as { __ws: WebSocket }).__ws = this;
        }
      } as typeof WebSocket;
    });
    const input = page.getByLabel('Message');
    const send = page.getByRole('button', { name: 'Send', exact: true });
    await input.fill('Is the answer 42?');
    // The limit is 10 lines in any 3⅓ s per person, and the page sends a line only once the
    // one before came back: on a loaded machine a person typing never reaches it. So, as another
    // script in the page would, 15 lines go out on the same socket just before the person's Enter
    // (in its keydown, ahead of the page's own handler): the person's line is the one refused.
    await page.evaluate(() => {
      const ws = (window as unknown as { __ws: WebSocket }).__ws;
      document.querySelector('input[aria-label=Message]')!.addEventListener(
        'keydown',
        () => {
          for (let i = 0; i < 15; i++) ws.send(JSON.stringify({ type: 'chat.send', text: `burst ${i}` }));
        },
        { once: true, capture: true },
      );
    });
    await input.press('Enter');
    await page.getByText('Too many messages at once').waitFor();
    const log = page.getByRole('log', { name: 'Chat history' });
    await log.getByText('burst 9', { exact: true }).waitFor();
    expect(await input.inputValue()).toBe('Is the answer 42?');
    expect(await log.getByText('Is the answer 42?').count()).toBe(0);
    await stack.shot(page, 'chat-refused');
    await page.waitForTimeout(3600); // the burst leaves the window (10 lines in any 3⅓ s)
    await send.click();
    await log.getByText('Is the answer 42?', { exact: true }).waitFor();
    await page.waitForFunction(() => (document.querySelector('input[aria-label=Message]') as HTMLInputElement).value === '');
    await page.context().close();
  }, 90_000);

  it('announces new chat lines to screen readers (a polite live region holding only the lines)', async () => {
    const { a, b } = await stack.teacherAndStudent('board_only', 'generic');
    const log = a.getByRole('log', { name: 'Chat history' });
    expect(await log.getAttribute('aria-live')).toBe('polite');
    expect(await log.getAttribute('aria-relevant')).toBe('additions');
    await b.getByLabel('Message').fill('Can you hear me?');
    await b.getByRole('button', { name: 'Send', exact: true }).click();
    await log.getByText('Can you hear me?').waitFor();
    await a.context().close();
    await b.context().close();
  }, 60_000);

  it('keeps + and the pin on screen however many pages there are, the current tab in view, on a laptop and a phone', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const url = await l.url('t1', 'Anna Petrova', 'teacher');
    const a = await stack.open(url);
    for (let i = 1; i <= 13; i++) {
      await a.getByRole('button', { name: 'Add page' }).click();
      await a.locator(`[data-testid=page-tab-${i}][aria-current=page]`).waitFor();
    }
    /** on screen and the topmost thing at its middle: a person can see it and click it */
    const reachable = (page: Watched, selector: string) =>
      page.evaluate((sel) => {
        const el = document.querySelector(sel);
        if (!el) return false;
        const r = el.getBoundingClientRect();
        const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
        return r.width > 0 && r.left >= 0 && r.right <= innerWidth && !!hit && el.contains(hit);
      }, selector);
    for (const sel of ['.page-add', '[data-testid=pin]', '.page-tab[aria-current=page]']) expect(await reachable(a, sel), `laptop: ${sel}`).toBe(true);
    await stack.shot(a, 'pages-many-laptop');
    // the same teacher on a phone: adds one more there, and is shown its tab
    const phone = await stack.open(url, PHONE);
    await phone.locator('[data-testid=page-tab-13]').waitFor({ state: 'attached' });
    expect(await reachable(phone, '[data-testid=pin]'), 'phone: the pin').toBe(true);
    expect(await reachable(phone, '.page-add'), 'phone: +').toBe(true);
    await phone.locator('.page-add').tap();
    await phone.locator('[data-testid=page-tab-14][aria-current=page]').waitFor();
    await expect.poll(() => reachable(phone, '.page-tab[aria-current=page]'), { timeout: 3_000 }).toBe(true);
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await stack.shot(phone, 'pages-many-phone');
    await a.context().close();
    await phone.context().close();
  }, 90_000);

  it('lets a teacher delete a page with the keyboard alone', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const page = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'));
    await page.getByRole('button', { name: 'Add page' }).focus();
    await page.keyboard.press('Enter');
    await page.locator('[data-testid=page-tab-1]').waitFor();
    await page.locator('[data-testid=page-tab-1]').focus();
    await page.keyboard.press('Enter'); // go to the new page
    await page.waitForFunction(() => document.querySelector('[data-testid=page-tab-1]')?.getAttribute('aria-current') === 'page');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).toBe('Delete page Page 2');
    await stack.shot(page, 'page-delete-focused');
    await page.keyboard.press('Enter'); // confirms (the test accepts the dialog)
    await page.locator('[data-testid=page-tab-1]').waitFor({ state: 'detached' });
    expect(await page.locator('.page-tab').count()).toBe(1);
    await page.context().close();
  }, 60_000);

  it('draws inactive tabs, the red buttons and the pinned note with at least 4.5:1 contrast (WCAG AA)', async () => {
    const { a, b } = await stack.teacherAndStudent('full', 'math');
    await a.getByRole('button', { name: 'Add page' }).click();
    await a.locator('[data-testid=page-tab-1]').waitFor();
    await a.waitForFunction(() => document.querySelectorAll('[data-testid=participants] li').length === 2);
    await b.locator('[data-testid=toggle-mic]', { hasText: 'Mic on' }).click();
    await b.locator('[data-testid=toggle-mic]', { hasText: 'Mic off' }).waitFor();
    const ratios: Record<string, number> = {
      'inactive tab': await contrast(a, '.page-tab:not(.current)'),
      'current tab': await contrast(a, '.page-tab.current'),
      'Remove (red)': await contrast(a, '.controls .danger'),
      'Mic off (red)': await contrast(b, '.call-controls .off'),
    };
    await a.locator('.people li:not(.me)').hover();
    ratios['Remove (red), row hovered'] = await contrast(a, '.controls .danger');
    await a.locator('[data-testid=page-tab-1]').click();
    await a.getByTestId('pin').click();
    await b.locator('.pin-note').waitFor();
    ratios['disabled tab (pinned)'] = await contrast(b, '.page-tab:disabled');
    ratios['pinned note'] = await contrast(b, '.pin-note');
    await stack.shot(a, 'contrast-teacher');
    await stack.shot(b, 'contrast-student');
    console.log('contrast ratios', ratios);
    for (const [what, r] of Object.entries(ratios)) expect(r, what).toBeGreaterThanOrEqual(4.5);
    await a.context().close();
    await b.context().close();
  }, 90_000);
});
