import { PDFDocument } from 'pdf-lib';
import { describe, expect, it } from 'vitest';
import { startTestApi } from '../helpers/api.js';
import { join } from '../realtime/helpers/client.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { showsExactly } from './actions.js';
import { startPageStack } from './browser.js';
import { image, rect } from './factories.js';
import { MAGENTA, magentaPng, paste, pixelsOf, waiter } from './imagesPage.js';
import { startProxy } from './proxy.js';

/**
 * A rolling deploy from a release without images, in Chromium: node A has images switched off
 * (FILE_IMAGES=false: it refuses image elements and uploads as the older release does, and lists
 * no `image` in board.state), node B takes them; both share Postgres and Redis. The teacher's page
 * reaches A through a proxy that later moves them to B, as a deploy's drain does.
 */
const stack = await startPageStack({ FILE_IMAGES: 'false' });
const b = await startTestGateway({ env: { ...stack.gw.env, FILE_IMAGES: 'true' } });
const proxy = await startProxy(stack.gw.port);
const api = await startTestApi({ env: stack.gw.env });
const waitFor = waiter(stack, 'images-deploy');
const snapshot = async (lessonId: string) => (await api.request('GET', `/lessons/${lessonId}/snapshot`, { key: stack.partner().apiKey })).body;
const imagesOf = (snap: { elements: { type: string; status?: string }[] }) => snap.elements.filter((e) => e.type === 'image');
const through = (url: string, port: number) => url.replace(`:${stack.gw.port}/`, `:${port}/`);
/** the browser's own line for a 503 (the upload A refuses) is expected; nothing else */
const unexpected = (errors: string[]) => errors.filter((e) => !/status of 503/.test(e));

describe('images while old and new gateways run side by side', () => {
  it('a node with images off refuses image elements and uploads, and lists no image in board.state', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const token = new URL(await l.url('t1', 'Anna', 'teacher')).pathname.split('/').pop()!;
    const c = await join(stack.gw.wsUrl(token));
    c.send({ type: 'board.sync', since: 0 });
    const state = await c.waitType('board.state', 20_000);
    expect(state.element_types).not.toContain('image');
    expect(state.element_types).toContain('freehand');
    c.send({ type: 'board.op', ref: 'img', op: { type: 'element.add', elements: [image('i1', 'a'.repeat(64))] } });
    const reject = await c.waitFor((m) => m.type === 'board.reject' && m.ref === 'img', 'the image refused', 20_000);
    expect(reject).toMatchObject({ code: 'invalid', message: 'Images cannot be added on this server at the moment: try again in a few minutes.' });
    const up = await fetch(stack.gw.httpUrl(`/files/${l.lessonId}`), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'image/png' }, body: await magentaPng() });
    expect(up.status).toBe(503);
    expect(up.headers.get('retry-after')).toBe('10');
    expect(imagesOf(await snapshot(l.lessonId))).toEqual([]);
    await c.close();
  });

  it("a page of a release before images gets the board without them, and is told once to reload", async () => {
    const l = await stack.lesson('board_only', 'generic');
    const tokenOf = async (id: string, role: 'teacher' | 'student') => new URL(await l.url(id, id, role)).pathname.split('/').pop()!;
    const fresh = await join(b.wsUrl(await tokenOf('t1', 'teacher')));
    // the old page's socket: no `images=1`
    const old = await join(`ws://127.0.0.1:${b.port}/ws?token=${encodeURIComponent(await tokenOf('s1', 'student'))}`);
    for (const c of [fresh, old]) {
      c.send({ type: 'board.sync', since: 0 });
      await c.waitType('board.state', 20_000);
    }
    const up = await fetch(b.httpUrl(`/files/${l.lessonId}`), { method: 'POST', headers: { authorization: `Bearer ${await tokenOf('t1', 'teacher')}`, 'content-type': 'image/png' }, body: await magentaPng() });
    const file = (await up.json()) as { id: string };
    fresh.send({ type: 'board.op', ref: 'both', op: { type: 'element.add', elements: [image('i1', file.id), rect('i2')] } });
    await fresh.waitFor((m) => m.type === 'board.ack' && m.ref === 'both', 'the ack', 20_000);
    const ops = await old.waitFor((m) => m.type === 'board.ops', 'the operation', 20_000);
    // the rectangle reaches the old page, the image does not (its seq does: no gap)
    expect(ops.ops[0].op.elements.map((e: { id: string }) => e.id)).toEqual(['i2']);
    const notice = await old.waitFor((m) => m.type === 'board.reject', 'the notice', 20_000);
    expect(notice).toMatchObject({ ref: '', message: 'This board has images your page cannot show: reload the page to see them.' });
    old.send({ type: 'board.sync', since: 0 });
    const state = await old.waitFor((m) => m.type === 'board.state' && m.seq > 0, 'the state', 20_000);
    expect(state.elements.map((e: { id: string }) => e.id)).toEqual(['i2']);
    // told once only: a later operation reaches the old page after anything the sync caused
    fresh.send({ type: 'board.op', ref: 'later', op: { type: 'element.add', elements: [rect('i3')] } });
    await old.waitFor((m) => m.type === 'board.ops' && m.ops.some((o: { op: { elements?: { id: string }[] } }) => o.op.elements?.some((e) => e.id === 'i3')), 'a later operation', 20_000);
    expect(old.of('board.reject')).toHaveLength(1);
    await Promise.all([fresh.close(), old.close()]);
  });

  it('an image added on a node without images waits on its author\'s screen, with a sentence, and reaches everyone once the page is on a node with them', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const teacher = await stack.open(through(await l.url('t1', 'Anna', 'teacher'), proxy.port));
    const student = await stack.open(through(await l.url('s1', 'Boris', 'student'), b.port));
    const refusedUploads: number[] = [];
    teacher.on('response', (r) => r.url().includes('/files/') && r.status() === 503 && refusedUploads.push(r.status()));

    // a PDF import is not started on such a node: no page would get its picture
    const pdf = await PDFDocument.create();
    pdf.addPage([72, 72]);
    await teacher.locator('[data-testid=pdf-input]').setInputFiles({ name: 'Sheet.pdf', mimeType: 'application/pdf', buffer: Buffer.from(await pdf.save()) });
    await teacher.getByRole('status').filter({ hasText: 'PDFs cannot be imported at the moment (the board is being updated): try again in a few minutes.' }).waitFor();

    await paste(teacher, await magentaPng());
    await teacher.getByRole('status').filter({ hasText: 'Images cannot be shared at the moment (the board is being updated)' }).waitFor();
    await waitFor('the teacher sees their picture', async () => (await pixelsOf(teacher, MAGENTA)) > 2_000);
    await waitFor('node A refused the upload', async () => refusedUploads.length > 0);
    // nothing of it on the board yet: not half an image (an element without its file), nor a page without its picture
    const before = await snapshot(l.lessonId);
    expect(imagesOf(before)).toEqual([]);
    expect(before.pages).toHaveLength(1);
    await stack.shot(teacher, 'images-deploy-waiting');

    // the deploy moves the teacher to node B
    proxy.retarget(b.port);
    proxy.cut(0);
    await waitFor('the student sees the picture', async () => (await pixelsOf(student, MAGENTA)) > 2_000, 60_000);
    await waitFor('the image is saved', async () => {
      const imgs = imagesOf(await snapshot(l.lessonId));
      return imgs.length === 1 && imgs[0].status === 'saved';
    });
    expect((await snapshot(l.lessonId)).files).toHaveLength(1);
    await showsExactly(student, 1);
    await showsExactly(teacher, 1);
    await stack.shot(student, 'images-deploy-arrived');
    expect(unexpected([...teacher.errors, ...student.errors])).toEqual([]);
    await Promise.all([teacher.context().close(), student.context().close()]);
  }, 180_000);
});
