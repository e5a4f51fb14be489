import { describe, expect, it } from 'vitest';
import type { GatewayFeature } from '../../realtime/index.js';
import type { Refusal } from '../../realtime/admission/Admission.js';
import { eventually } from '../helpers/wait.js';
import { TestClient } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

/**
 * A lesson's first arrival: the lesson opens on the node (bus subscription,
 * the features' lesson state, the meter seed) once the link has checked,
 * while the features' own admission checks run (Gateway.expect), not after
 * the upgrade. A feature here holds its `admit` until the test lets it go and
 * records its lesson's opening and closing.
 */
const held = new Map<string, { release: (r?: Refusal) => void }>();
const log: string[] = [];
const gated: GatewayFeature = {
  name: 'gated',
  admit: (link) => new Promise<Refusal | undefined>((release) => held.set(link.lesson_id, { release })),
  onLessonOpen: (lesson) => {
    log.push(`open ${lesson.id}`);
  },
  onLessonClose: (lesson) => {
    log.push(`close ${lesson.id}`);
  },
};
const gw = await startTestGateway({ options: { features: [gated] } });
const removed: Refusal = { ok: false, status: 403, code: 'removed', message: 'removed by the teacher' };

describe('a lesson opens while its first arrival is still being admitted', () => {
  it('opens during the features\' admission check, and the arrival is welcomed once it passes', async () => {
    const f = await lessonWithLinks(gw.deps.sql);
    const c = new TestClient(gw.wsUrl(await f.link('ann')));
    await eventually(async () => held.has(f.lesson.id), 'the admission check under way');
    // the upgrade has not happened: no socket, yet the lesson is open and its features' state set up
    await eventually(async () => log.includes(`open ${f.lesson.id}`), 'the lesson opened during the check');
    expect(gw.gateway.openLessons()).toContain(f.lesson.id);
    expect(gw.gateway.localConnections(f.lesson.id)).toEqual([]);
    held.get(f.lesson.id)!.release();
    const welcome = await c.welcome();
    expect(welcome.people).toHaveLength(1);
    expect(log.filter((l) => l.endsWith(f.lesson.id))).toEqual([`open ${f.lesson.id}`]);
    await c.close();
    await gw.settle();
    expect(gw.gateway.openLessons()).not.toContain(f.lesson.id);
    expect(log.filter((l) => l.endsWith(f.lesson.id))).toEqual([`open ${f.lesson.id}`, `close ${f.lesson.id}`]);
  });

  it('closes again when the admission refuses the arrival, or the client gave up meanwhile, with nobody in it', async () => {
    for (const end of ['refused', 'aborted'] as const) {
      const f = await lessonWithLinks(gw.deps.sql);
      const c = new TestClient(gw.wsUrl(await f.link('bob')));
      await eventually(async () => held.has(f.lesson.id) && log.includes(`open ${f.lesson.id}`), 'the lesson open during the check');
      if (end === 'aborted') {
        c.ws.terminate();
        await c.closed;
        held.get(f.lesson.id)!.release();
      } else {
        held.get(f.lesson.id)!.release(removed);
        await expect(c.opened).rejects.toThrow('upgrade refused with 403');
      }
      await gw.settle();
      await eventually(async () => !gw.gateway.openLessons().includes(f.lesson.id), `the lesson closed (${end})`);
      expect(log.filter((l) => l.endsWith(f.lesson.id))).toEqual([`open ${f.lesson.id}`, `close ${f.lesson.id}`]);
      // nobody was present: no session started
      const [row] = await gw.deps.sql`SELECT count(*)::int AS n FROM sessions WHERE lesson_id = ${f.lesson.id}`;
      expect(row.n).toBe(0);
    }
  });

  it('stays open for the arrival under admission when the lesson\'s last present socket leaves meanwhile', async () => {
    const f = await lessonWithLinks(gw.deps.sql);
    const first = new TestClient(gw.wsUrl(await f.link('cat')));
    await eventually(async () => held.has(f.lesson.id));
    held.get(f.lesson.id)!.release();
    await first.welcome();
    held.delete(f.lesson.id);
    const second = new TestClient(gw.wsUrl(await f.link('dan')));
    await eventually(async () => held.has(f.lesson.id), 'the second admission under way');
    await first.close();
    await gw.settle();
    // the lesson did not close between the two (it would have been opened twice)
    expect(gw.gateway.openLessons()).toContain(f.lesson.id);
    held.get(f.lesson.id)!.release();
    const welcome = await second.welcome();
    expect(welcome.people.map((p: { name: string }) => p.name)).toEqual(['dan']);
    expect(log.filter((l) => l.endsWith(f.lesson.id))).toEqual([`open ${f.lesson.id}`]);
    await second.close();
    await gw.settle();
    expect(log.filter((l) => l.endsWith(f.lesson.id))).toEqual([`open ${f.lesson.id}`, `close ${f.lesson.id}`]);
  });
});
