import type { Page } from 'playwright-core';
import { drawRect, drawStroke, shownIds } from './actions.js';

/**
 * A randomised two-person session on one board: a teacher's and a
 * student's page do random actions as a person would (draw, move, delete,
 * undo, redo, add/switch/pin pages, reload), then both screens and the
 * snapshot must hold the same elements on every page. The seed decides every
 * choice, so a failure is replayed with the same seed (`npm run soak:board --
 * --seed N`). Used by test/board/random.browser.test.ts (a short fixed run)
 * and bench/board/soak.ts (long runs); no vitest in here.
 */
export interface Person {
  page: Page;
  url: string;
  role: 'teacher' | 'student';
}

export type Snapshot = { pages: { id: string }[]; elements: { id: string; page_id: string }[]; pinned_page_id?: string | null };

/** mulberry32: a small seeded generator, the same sequence for the same seed everywhere */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ACTIONS = ['draw', 'draw', 'draw', 'rect', 'move', 'delete', 'undo', 'redo', 'page', 'switch', 'switch', 'pin', 'reload'] as const;
type Action = (typeof ACTIONS)[number];

async function waitOpen(page: Page) {
  await page.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 20_000 });
  await page.locator('[data-testid=board]').waitFor();
}

async function tabs(page: Page): Promise<number> {
  return page.locator('[data-testid^=page-tab-]:not([data-testid^=page-tab-wrap])').count();
}

/** One action of one person; returns what it did, for the log. */
async function act(p: Person, action: Action, r: () => number, marks: Map<Page, [number, number][]>): Promise<string> {
  const { page } = p;
  const pick = (n: number) => Math.floor(r() * n);
  const at: [number, number] = [340 + pick(500), 220 + pick(380)];
  switch (action) {
    case 'draw':
      await drawStroke(page, at, 40 + pick(120), 6);
      marks.get(page)!.push(at);
      return `draw at ${at}`;
    case 'rect':
      await drawRect(page, at, [60 + pick(80), 40 + pick(60)]);
      marks.get(page)!.push(at); // the top-left corner is on its outline
      return `rect at ${at}`;
    case 'move': {
      await page.locator('[data-testid="toolbar-selection"]').click({ force: true });
      await page.keyboard.press('Control+a');
      const key = ['ArrowRight', 'ArrowDown', 'ArrowLeft', 'ArrowUp'][pick(4)];
      for (let i = 0; i < 3; i++) await page.keyboard.press(`Shift+${key}`);
      await page.keyboard.press('Escape');
      return `move all ${key}`;
    }
    case 'delete': {
      const mine = marks.get(page)!;
      if (!mine.length) return 'delete: nothing drawn here';
      const target = mine[pick(mine.length)];
      await page.locator('[data-testid="toolbar-selection"]').click({ force: true });
      const box = (await page.locator('[data-testid=board] canvas').last().boundingBox())!;
      await page.mouse.click(box.x + target[0], box.y + target[1]);
      await page.keyboard.press('Delete');
      return `delete at ${target}`;
    }
    case 'undo':
      await page.keyboard.press('Control+z');
      return 'undo';
    case 'redo':
      await page.keyboard.press('Control+Shift+z');
      return 'redo';
    case 'page': {
      const add = page.getByRole('button', { name: 'Add page' });
      // isVisible first: it answers at once, while isDisabled waits for a button that is not there (a student while a page is pinned)
      if ((await tabs(page)) >= 4 || !(await add.isVisible()) || (await add.isDisabled())) return 'add page: skipped';
      await add.click();
      return 'add page';
    }
    case 'switch': {
      const n = await tabs(page);
      const i = pick(n);
      const tab = page.locator(`[data-testid=page-tab-${i}]`);
      if (await tab.isDisabled()) return `switch to ${i}: disabled (pinned)`;
      await tab.click();
      return `switch to ${i}`;
    }
    case 'pin': {
      if (p.role !== 'teacher') return 'pin: not a teacher';
      const unpin = page.locator('[data-testid=unpin]');
      if (await unpin.isVisible()) {
        await unpin.click();
        return 'unpin';
      }
      const pin = page.locator('[data-testid=pin]');
      if (!(await pin.isVisible())) return 'pin: no button';
      await pin.click();
      return 'pin';
    }
    case 'reload':
      await page.reload();
      await waitOpen(page);
      marks.set(page, []);
      return 'reload';
  }
}

/**
 * Runs `actions` random actions alternating between the two people at random,
 * then checks convergence. Throws with the seed and the action log when the
 * screens and the snapshot disagree.
 */
export async function randomSession(opts: {
  people: [Person, Person];
  seed: number;
  actions: number;
  snapshot: () => Promise<Snapshot>;
  log?: (line: string) => void;
}): Promise<{ elements: number; pages: number; log: string[] }> {
  const r = rng(opts.seed);
  const log: string[] = [];
  const marks = new Map<Page, [number, number][]>(opts.people.map((p) => [p.page, []]));
  for (let i = 0; i < opts.actions; i++) {
    const who = opts.people[r() < 0.5 ? 0 : 1];
    const action = ACTIONS[Math.floor(r() * ACTIONS.length)];
    const did = await act(who, action, r, marks);
    const line = `${i + 1}. ${who.role}: ${did}`;
    log.push(line);
    opts.log?.(line);
  }
  // the end of the lesson: unpinned, everyone connected, nothing in flight
  const teacher = opts.people.find((p) => p.role === 'teacher')!;
  const unpin = teacher.page.locator('[data-testid=unpin]');
  // the teacher may be on another page than the pinned one: pinning the page shown moves the pin there
  if (!(await unpin.isVisible()) && (await opts.snapshot()).pinned_page_id) {
    await teacher.page.locator('[data-testid=pin]').click();
    await unpin.waitFor({ timeout: 5000 });
  }
  if (await unpin.isVisible()) await unpin.click();
  for (const p of opts.people) await waitOpen(p.page);
  const fail = (why: string) => new Error(`random session seed=${opts.seed} actions=${opts.actions}: ${why}\n${log.join('\n')}`);
  let lastWhy = '';
  const deadline = Date.now() + 20_000;
  for (;;) {
    const snap = await opts.snapshot();
    const want = new Map(snap.pages.map((pg) => [pg.id, [] as string[]]));
    for (const e of snap.elements) want.get(e.page_id)!.push(e.id);
    lastWhy = '';
    for (const p of opts.people) {
      if ((await tabs(p.page)) !== snap.pages.length) lastWhy ||= `${p.role} shows ${await tabs(p.page)} pages, the snapshot ${snap.pages.length}`;
      for (const [ix, ids] of [...want.values()].entries()) {
        if (lastWhy) break;
        const tab = p.page.locator(`[data-testid=page-tab-${ix}]`);
        if (!(await tab.count())) continue;
        // the teacher's unpin may not have reached this page yet: its tabs are still held
        if (await tab.isDisabled()) {
          lastWhy = `${p.role}: page ${ix} is still held by a pin`;
          break;
        }
        await tab.click();
        await p.page.locator(`[data-testid=page-tab-${ix}].current`).waitFor({ timeout: 5000 });
        const shown = await shownIds(p.page);
        const expected = [...ids].sort();
        if (JSON.stringify(shown) !== JSON.stringify(expected)) lastWhy = `${p.role}, page ${ix}: shows [${shown}], the snapshot has [${expected}]`;
      }
    }
    if (!lastWhy) return { elements: snap.elements.length, pages: snap.pages.length, log };
    if (Date.now() > deadline) throw fail(lastWhy);
    await new Promise((res) => setTimeout(res, 500));
  }
}
