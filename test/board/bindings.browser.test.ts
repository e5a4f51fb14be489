import path from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { clickAt, dragFrom, drawRect, drawStroke, inkIn, showsExactly, typeLabel } from './actions.js';

/** Draws an arrow by dragging with the arrow tool (canvas coordinates). */
async function drawArrow(page: Page, from: [number, number], to: [number, number]) {
  await page.locator('[data-testid="toolbar-arrow"]').click({ force: true });
  const box = (await page.locator('[data-testid=board] canvas').last().boundingBox())!;
  await page.mouse.move(box.x + from[0], box.y + from[1]);
  await page.mouse.down();
  await page.mouse.move(box.x + (from[0] + to[0]) / 2, box.y + (from[1] + to[1]) / 2, { steps: 4 });
  await page.mouse.move(box.x + to[0], box.y + to[1], { steps: 4 });
  await page.mouse.up();
}
import { ARTIFACTS, startSession } from './session.js';

/**
 * Labels inside shapes and arrows attached to shapes (docs/snapshot-format.md,
 * "Labels and attached arrows"): one person makes them, the other moves the
 * shape with the mouse; both screens, a reload and the partner's snapshot keep
 * them together.
 */
const s = await startSession();

type El = { id: string; type: string; x: number; y: number; width: number; height: number; points?: [number, number][]; container_id?: string; start_binding?: { element_id: string }; end_binding?: { element_id: string } };
const elements = async (lessonId: string) => (await s.snapshot(lessonId)).elements as unknown as El[];

/** The box [x0, y0, x1, y1] of the rectangle drawn at (x, y) with size (w, h), shrunk by `inset` (negative: grown). */
const area = (x: number, y: number, w: number, h: number, inset: number): [number, number, number, number] => [x + inset, y + inset, x + w - inset, y + h - inset];

describe('labels and arrows attached to shapes', () => {
  it('keeps a label inside its rectangle when the other person moves it: both screens, the snapshot, a reload', async () => {
    const { lesson, teacher, student } = await s.lesson();
    const a = await s.open(teacher.url);
    const b = await s.open(student.url);
    // the teacher draws a rectangle and types a label into it (double-click inside, type)
    const [x, y, w, h] = [450, 250, 240, 120];
    await drawRect(a, [x, y], [w, h]);
    await typeLabel(a, [x, y, w, h], 'Label');
    await expect.poll(async () => (await elements(lesson.id)).map((e) => e.type).sort(), { timeout: 10_000 }).toEqual(['rectangle', 'text']);
    await showsExactly(b, 2);
    const rect0 = (await elements(lesson.id)).find((e) => e.type === 'rectangle')!;

    // the student moves the rectangle 200 down by its left edge
    await dragFrom(b, [x, y + h / 2], [x, y + h / 2 + 200]);
    await expect.poll(async () => (await elements(lesson.id)).find((e) => e.type === 'rectangle')!.y, { timeout: 10_000 }).toBeGreaterThan(rect0.y + 150);
    // both screens: nothing left where the rectangle was, the label inside the moved one
    const screen = async (p: Page) => ({ old: await inkIn(p, area(x, y, w, h, -6)), label: (await inkIn(p, area(x, y + 200, w, h, 12))) > 20 });
    const want = { old: 0, label: true };
    try {
      await expect.poll(() => screen(b), { timeout: 10_000 }).toEqual(want);
      await expect.poll(() => screen(a), { timeout: 10_000 }).toEqual(want);
    } finally {
      await a.screenshot({ path: path.join(ARTIFACTS, 'bindings-label-teacher.png') });
      await b.screenshot({ path: path.join(ARTIFACTS, 'bindings-label-student.png') });
    }
    // the snapshot: the label moved with it, still its label, its middle inside the rectangle
    const moved = async () => {
      const els = await elements(lesson.id);
      const r = els.find((e) => e.type === 'rectangle')!;
      const t = els.find((e) => e.type === 'text')!;
      const cx = t.x + t.width / 2;
      const cy = t.y + t.height / 2;
      return { contained: t.container_id === r.id, inside: cx > r.x && cx < r.x + r.width && cy > r.y && cy < r.y + r.height };
    };
    await expect.poll(moved, { timeout: 10_000 }).toEqual({ contained: true, inside: true });

    // a reload (and so a late join) shows it the same
    await a.reload();
    await a.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 20_000 });
    await showsExactly(a, 2);
    await expect.poll(() => screen(a), { timeout: 10_000 }).toEqual(want);
    await a.screenshot({ path: path.join(ARTIFACTS, 'bindings-label-teacher-reloaded.png') });
    expect(await moved()).toEqual({ contained: true, inside: true });
    expect([...a.errors, ...b.errors]).toEqual([]);
    await a.context().close();
    await b.context().close();
  }, 120_000);

  it('keeps an arrow attached to both rectangles when the other person moves one: both screens, the snapshot, a reload', async () => {
    const { lesson, teacher, student } = await s.lesson();
    const a = await s.open(teacher.url);
    const b = await s.open(student.url);
    // two rectangles side by side, an arrow from the right edge of the first to the left edge of the second
    await drawRect(a, [350, 250], [150, 100]);
    await drawRect(a, [650, 250], [150, 100]);
    await drawArrow(a, [506, 300], [644, 300]);
    await a.keyboard.press('Escape');
    await expect.poll(async () => (await elements(lesson.id)).length, { timeout: 10_000 }).toBe(3);
    await showsExactly(b, 3);
    const r2y = async () => (await elements(lesson.id)).filter((e) => e.type === 'rectangle').sort((p, q) => p.x - q.x)[1].y;
    const y0 = await r2y();

    // the student drags the second rectangle 150 down by its right edge
    await dragFrom(b, [800, 300], [800, 450]);
    await expect.poll(r2y, { timeout: 10_000 }).toBeGreaterThan(y0 + 100);
    // both screens: the arrow does not run straight across at y 300, it goes down to the moved rectangle
    const screen = async (p: Page) => ({ straight: await inkIn(p, [560, 290, 590, 310]), down: (await inkIn(p, [520, 310, 640, 440])) > 10 });
    const want = { straight: 0, down: true };
    try {
      await expect.poll(() => screen(b), { timeout: 10_000 }).toEqual(want);
      await expect.poll(() => screen(a), { timeout: 10_000 }).toEqual(want);
    } finally {
      await a.screenshot({ path: path.join(ARTIFACTS, 'bindings-arrow-teacher.png') });
      await b.screenshot({ path: path.join(ARTIFACTS, 'bindings-arrow-student.png') });
    }
    // the snapshot: still attached at both ends, its end at the moved rectangle
    const attached = async () => {
      const els = await elements(lesson.id);
      const [r1, r2] = els.filter((e) => e.type === 'rectangle').sort((p, q) => p.x - q.x);
      const ar = els.find((e) => e.type === 'arrow')!;
      const [ex, ey] = ar.points!.at(-1)!;
      const end = [ar.x + ex, ar.y + ey];
      return {
        start: ar.start_binding?.element_id === r1.id,
        end: ar.end_binding?.element_id === r2.id,
        endAtMoved: end[0] > r2.x - 30 && end[0] < r2.x + r2.width + 30 && end[1] > r2.y - 30 && end[1] < r2.y + r2.height + 30,
      };
    };
    await expect.poll(attached, { timeout: 10_000 }).toEqual({ start: true, end: true, endAtMoved: true });

    await a.reload();
    await a.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 20_000 });
    await showsExactly(a, 3);
    await expect.poll(() => screen(a), { timeout: 10_000 }).toEqual(want);
    // and after the reload, the teacher's own move of the first rectangle takes the arrow along too
    await dragFrom(a, [350, 300], [350, 150]);
    await expect
      .poll(async () => {
        const els = await elements(lesson.id);
        const r1 = els.filter((e) => e.type === 'rectangle').sort((p, q) => p.x - q.x)[0];
        const ar = els.find((e) => e.type === 'arrow')!;
        return { moved: r1.y < 200, arrowStart: ar.y < r1.y + r1.height + 30 && ar.y > r1.y - 30 };
      }, { timeout: 10_000 })
      .toEqual({ moved: true, arrowStart: true });
    expect(await attached()).toMatchObject({ start: true, end: true });
    expect([...a.errors, ...b.errors]).toEqual([]);
    await a.context().close();
    await b.context().close();
  }, 120_000);

  it('wraps a long label on the other screen, after a reload and after the shape is resized, as its author sees it', async () => {
    const { lesson, teacher, student } = await s.lesson();
    const a = await s.open(teacher.url);
    const b = await s.open(student.url);
    const [x, y, w, h] = [450, 250, 200, 120];
    await drawRect(a, [x, y], [w, h]);
    await typeLabel(a, [x, y, w, h], 'Homework for Monday: exercises four to nine');
    await expect.poll(async () => (await elements(lesson.id)).find((e) => e.type === 'text')?.height, { timeout: 10_000 }).toBeGreaterThan(60); // three lines
    // which half-line bands of the shape's inside hold text, top to bottom: the lines as they are drawn
    const lines = async (p: Page) => {
      const r = (await elements(lesson.id)).find((e) => e.type === 'rectangle')!;
      const bands: boolean[] = [];
      for (let top = r.y + 8; top + 12 <= r.y + r.height - 8; top += 12) bands.push((await inkIn(p, [r.x + 8, top, r.x + r.width - 8, top + 12])) > 15);
      return bands.map((on) => (on ? '#' : '.')).join('');
    };
    const shot = async (name: string) => {
      await a.screenshot({ path: path.join(ARTIFACTS, `bindings-long-label-${name}-teacher.png`) });
      await b.screenshot({ path: path.join(ARTIFACTS, `bindings-long-label-${name}-student.png`) });
    };
    const teacherSees = await lines(a);
    expect(teacherSees.match(/#+/g)?.length ?? 0, teacherSees).toBeGreaterThanOrEqual(1);
    expect(teacherSees.replace(/\./g, '').length, teacherSees).toBeGreaterThanOrEqual(5); // three lines of about two bands
    // the student's screen: the same lines, not one line cut off at both sides of the shape
    await expect.poll(() => lines(b), { timeout: 10_000 }).toBe(teacherSees).catch(async (err) => (await shot('arrived'), Promise.reject(err)));
    // a reload of the student's page shows it the same way
    await b.reload();
    await b.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 20_000 });
    await showsExactly(b, 2);
    await expect.poll(() => lines(b), { timeout: 10_000 }).toBe(teacherSees).catch(async (err) => (await shot('reloaded'), Promise.reject(err)));

    // the teacher makes the shape narrower by its bottom-right corner: the label wraps into more lines
    const box = (await a.locator('[data-testid=board] canvas').last().boundingBox())!;
    await a.locator('[data-testid="toolbar-selection"]').click({ force: true });
    await a.mouse.click(box.x + x, box.y + y + h / 2); // its left edge: selected
    await a.mouse.move(box.x + x + w + 4, box.y + y + h + 4);
    await a.mouse.down();
    await a.mouse.move(box.x + x + w - 30, box.y + y + h + 4, { steps: 4 });
    await a.mouse.move(box.x + x + w - 60, box.y + y + h + 4, { steps: 4 });
    await a.mouse.up();
    await expect.poll(async () => (await elements(lesson.id)).find((e) => e.type === 'rectangle')!.width, { timeout: 10_000 }).toBeLessThan(w - 40);
    await a.keyboard.press('Escape'); // nothing selected: the selection box is not ink
    await new Promise((r) => setTimeout(r, 300));
    const narrower = await lines(a);
    expect(narrower.replace(/\./g, '').length, narrower).toBeGreaterThan(teacherSees.replace(/\./g, '').length);
    await expect.poll(() => lines(b), { timeout: 10_000 }).toBe(narrower).catch(async (err) => (await shot('resized'), Promise.reject(err)));
    await shot('resized');
    expect([...a.errors, ...b.errors]).toEqual([]);
    await a.context().close();
    await b.context().close();
  }, 120_000);

  it('keeps a label where its author put it in the shape\'s height (top) when the other person moves the shape: both screens, the snapshot, a reload', async () => {
    const { lesson, teacher, student } = await s.lesson();
    const a = await s.open(teacher.url);
    const b = await s.open(student.url);
    const [x, y, w, h] = [450, 150, 240, 220];
    await drawRect(a, [x, y], [w, h]);
    await typeLabel(a, [x, y, w, h], 'Top');
    await expect.poll(async () => (await elements(lesson.id)).map((e) => e.type).sort(), { timeout: 10_000 }).toEqual(['rectangle', 'text']);
    // the teacher selects the rectangle by its edge and puts its label at the top (Excalidraw's "Align top")
    await clickAt(a, [x, y + h / 2]);
    await a.locator('[data-testid="align-top"]').click({ force: true });
    type Label = El & { vertical_align?: string };
    const label = async () => {
      const els = (await elements(lesson.id)) as Label[];
      const r = els.find((e) => e.type === 'rectangle')!;
      const t = els.find((e) => e.type === 'text')!;
      return { align: t.vertical_align, atTop: t.y - r.y < 20, contained: t.container_id === r.id };
    };
    await expect.poll(label, { timeout: 10_000 }).toEqual({ align: 'top', atTop: true, contained: true });
    // on a screen: ink in the band at the top of the rectangle (at dy from where it was drawn, of
    // height hh), none in its middle
    const screen = async (p: Page, dy: number, hh = h) => ({
      top: (await inkIn(p, [x + 40, y + dy + 4, x + w - 40, y + dy + 45])) > 20,
      middle: await inkIn(p, [x + 40, y + dy + hh / 2 - 30, x + w - 40, y + dy + hh / 2 + 30]),
    });
    const want = { top: true, middle: 0 };
    await expect.poll(() => screen(b, 0), { timeout: 10_000 }).toEqual(want);

    // the student moves the rectangle 150 down by its left edge, then makes it 100 taller by its
    // corner handle (the editor places the label again): it stays at the top on both screens
    const r0 = (await elements(lesson.id)).find((e) => e.type === 'rectangle')!;
    await dragFrom(b, [x, y + h / 2], [x, y + h / 2 + 150]);
    await dragFrom(b, [x + w + 4, y + 150 + h + 4], [x + w + 4, y + 150 + h + 104]);
    await expect.poll(async () => (await elements(lesson.id)).find((e) => e.type === 'rectangle')!, { timeout: 10_000 }).toMatchObject({
      y: expect.toSatisfy((v: number) => v > r0.y + 100),
      height: expect.toSatisfy((v: number) => v > r0.height + 50),
    });
    try {
      await expect.poll(() => screen(b, 150, h + 100), { timeout: 10_000 }).toEqual(want);
      await expect.poll(() => screen(a, 150, h + 100), { timeout: 10_000 }).toEqual(want);
    } finally {
      await a.screenshot({ path: path.join(ARTIFACTS, 'bindings-label-top-teacher.png') });
      await b.screenshot({ path: path.join(ARTIFACTS, 'bindings-label-top-student.png') });
    }
    await expect.poll(label, { timeout: 10_000 }).toEqual({ align: 'top', atTop: true, contained: true });

    // a reload (and so a late join) shows it at the top too
    await b.reload();
    await b.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 20_000 });
    await showsExactly(b, 2);
    await expect.poll(() => screen(b, 150, h + 100), { timeout: 10_000 }).toEqual(want);
    expect([...a.errors, ...b.errors]).toEqual([]);
    await a.context().close();
    await b.context().close();
  }, 120_000);

  it('keeps a label typed while the other person draws (their strokes redraw the typist\'s scene) in its shape', async () => {
    const { lesson, teacher, student } = await s.lesson();
    const a = await s.open(teacher.url);
    const b = await s.open(student.url);
    const [x, y, w, h] = [450, 250, 240, 120];
    await drawRect(a, [x, y], [w, h]);
    await showsExactly(b, 1);
    const box = (await a.locator('[data-testid=board] canvas').last().boundingBox())!;
    await a.mouse.dblclick(box.x + x + w / 2, box.y + y + h / 2);
    await a.keyboard.type('La');
    // the student's stroke arrives on the teacher's page while she is typing
    await drawStroke(b, [400, 550], 200, 8);
    await expect.poll(async () => (await elements(lesson.id)).some((e) => e.type === 'freehand'), { timeout: 10_000 }).toBe(true);
    const seq = (await s.snapshot(lesson.id)).seq;
    await a.waitForFunction((k) => Number(document.querySelector('[data-testid=board]')?.getAttribute('data-seq')) >= k, seq, { timeout: 10_000 });
    await a.keyboard.type('bel');
    await a.keyboard.press('Escape');
    // (what she typed so far may be stored before the rest: wait for the whole label)
    const labelled = async () => {
      const els = await elements(lesson.id);
      const t = els.find((e) => e.type === 'text') as (El & { text?: string }) | undefined;
      return { types: els.map((e) => e.type).sort(), text: t?.text, inRect: t?.container_id === els.find((e) => e.type === 'rectangle')?.id };
    };
    await expect.poll(labelled, { timeout: 10_000 }).toEqual({ types: ['freehand', 'rectangle', 'text'], text: 'Label', inRect: true });
    // and it moves with the shape when the student moves it
    await showsExactly(b, 3);
    await dragFrom(b, [x, y + h / 2], [x, y + h / 2 - 120]);
    const screen = async (p: Page) => ({ label: (await inkIn(p, area(x, y - 120, w, h, 12))) > 20, old: await inkIn(p, [x + 12, y + h - 10, x + w - 12, y + h + 6]) });
    await expect.poll(() => screen(b), { timeout: 10_000 }).toEqual({ label: true, old: 0 });
    await expect.poll(() => screen(a), { timeout: 10_000 }).toEqual({ label: true, old: 0 });
    expect([...a.errors, ...b.errors]).toEqual([]);
    await a.context().close();
    await b.context().close();
  }, 120_000);
});

describe('corners and bends', () => {
  it('shows a sharp rectangle sharp and a curved arrow curved on the other screen and after a reload, as their author drew them', async () => {
    const { lesson, teacher, student } = await s.lesson();
    const a = await s.open(teacher.url);
    const b = await s.open(student.url);
    // the teacher draws a rectangle and makes its corners sharp (Excalidraw's "Edges: Sharp")
    const [x, y, w, h] = [250, 200, 200, 120];
    await drawRect(a, [x, y], [w, h]);
    await a.locator('label[title="Sharp"]').click();
    await a.keyboard.press('Escape');
    // and an arrow of three points by clicks (the editor's default arrow is curved)
    await a.locator('[data-testid="toolbar-arrow"]').click({ force: true });
    const box = (await a.locator('[data-testid=board] canvas').last().boundingBox())!;
    for (const [px, py] of [[600, 200], [800, 200], [800, 400]]) await a.mouse.click(box.x + px, box.y + py);
    await a.keyboard.press('Escape');
    const stored = async () => {
      const els = (await elements(lesson.id)) as (El & { edges?: string })[];
      return els.map((e) => `${e.type} ${e.edges} ${e.points?.length ?? ''}`.trim()).sort();
    };
    await expect.poll(stored, { timeout: 10_000 }).toEqual(['arrow round 3', 'rectangle sharp']);
    // on a screen: ink at the rectangle's very corner (a round corner leaves it empty), and beside
    // the arrow's second leg where only a curve through its bend passes
    const screen = async (p: Page) => ({
      corner: (await inkIn(p, [x - 4, y - 4, x + 5, y + 5])) > 0,
      curve: (await inkIn(p, [806, 210, 840, 300])) > 5,
    });
    const want = { corner: true, curve: true };
    try {
      await expect.poll(() => screen(a), { timeout: 10_000 }).toEqual(want);
      await expect.poll(() => screen(b), { timeout: 10_000 }).toEqual(want);
    } finally {
      await a.screenshot({ path: path.join(ARTIFACTS, 'edges-teacher.png') });
      await b.screenshot({ path: path.join(ARTIFACTS, 'edges-student.png') });
    }
    await b.reload();
    await b.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 20_000 });
    await showsExactly(b, 2);
    await expect.poll(() => screen(b), { timeout: 10_000 }).toEqual(want);
    expect([...a.errors, ...b.errors]).toEqual([]);
    await a.context().close();
    await b.context().close();
  }, 120_000);

  it('sends a node that does not list them (older than the fields: a rolling deploy) no edges, and the drawing is kept', async () => {
    const { lesson, teacher } = await s.lesson();
    const sent: string[] = [];
    // the node's board.state without optional_fields, as a node from before the list sends it
    const a = await s.open(teacher.url, (pg) =>
      pg.routeWebSocket(/\/ws/, (ws) => {
        const server = ws.connectToServer();
        ws.onMessage((m) => {
          if (String(m).includes('"type":"board.op"')) sent.push(String(m));
          server.send(m);
        });
        server.onMessage((m) => {
          const msg = JSON.parse(String(m)) as { type: string; optional_fields?: string[] };
          if (msg.type === 'board.state') delete msg.optional_fields;
          ws.send(JSON.stringify(msg));
        });
      }),
    );
    await drawRect(a, [250, 200], [200, 120]);
    await a.locator('label[title="Sharp"]').click();
    await a.keyboard.press('Escape');
    await expect.poll(async () => (await elements(lesson.id)).map((e) => e.type), { timeout: 10_000 }).toEqual(['rectangle']);
    await expect.poll(() => sent.length).toBeGreaterThanOrEqual(2); // drawn, then made sharp
    expect(sent.filter((m) => m.includes('"edges"'))).toEqual([]);
    expect(Object.keys((await elements(lesson.id))[0])).not.toContain('edges');
    expect(a.errors).toEqual([]);
    await a.context().close();
  }, 60_000);
});
