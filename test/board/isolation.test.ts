import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { MAX_VERSION } from '../../src/board/schema.js';
import { gatewayMetrics } from '../../src/metrics/gateway.js';
import { suiteOrFull } from '../helpers/length.js';
import { join, type TestClient } from '../realtime/helpers/client.js';
import { lessonWithLinks, linkFor } from '../realtime/helpers/fixtures.js';
import { lessonFactory } from '../helpers/lessons.js';
import { poisonLesson } from '../helpers/poison.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { rect } from './factories.js';

/**
 * One lesson never fails another: a lesson whose board commit fails for good
 * (here a trigger refuses its rows with a data error, as an out-of-range value
 * would) is refused alone, while the other lessons committed in the same
 * transactions are all acknowledged. Real gateway, sockets, Postgres.
 */
// closing the gateway renders the previews of every lesson the scenario drew on (BoardService.close)
vi.setConfig({ hookTimeout: 180_000 });
const registry = new Registry();
const gw = await startTestGateway({ env: { BOARD_PREVIEW_DEBOUNCE_MS: '60000' }, options: { metrics: gatewayMetrics(registry) } });
const sql = gw.deps.sql;

const answered = (c: TestClient, ref: string) => c.waitFor((m) => (m.type === 'board.ack' || m.type === 'board.reject') && m.ref === ref, `answer to ${ref}`, 30_000);

/**
 * The scenario: `lessons` lessons of one partner draw `rate` operations a second each for `seconds`,
 * while one lesson of another partner sends an operation every 100 ms that fails its commit for good,
 * on a busy database.
 * Returns the other partner's refused operations and the hostile lesson's answers.
 */
async function hostileScenario(o: { lessons: number; rate: number; seconds: number }) {
  const hostile = await lessonWithLinks(sql);
  await poisonLesson(sql, 'board_elements', hostile.lesson.id);
  // the database is busy: each board write takes 100 ms longer, so the waiting operations of many
  // lessons, the hostile one's among them, share each commit (on a quiet machine they would not)
  await sql.unsafe(`
    CREATE OR REPLACE FUNCTION test_busy() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(0.1); RETURN NULL; END $$ LANGUAGE plpgsql;
    DROP TRIGGER IF EXISTS test_busy ON board_elements;
    CREATE TRIGGER test_busy AFTER INSERT OR UPDATE ON board_elements FOR EACH STATEMENT EXECUTE FUNCTION test_busy()`);
  const h = await join(gw.wsUrl(await hostile.link('t', { role: 'teacher' })));
  const other = await lessonWithLinks(sql);
  const clients: TestClient[] = [];
  for (let i = 0; i < o.lessons; i++) {
    const l = i === 0 ? other.lesson : await lessonFactory(sql, other.partner);
    clients.push(await join(gw.wsUrl(await linkFor(sql, other.partner, l, `t${i}`, { role: 'teacher' }))));
  }
  const perLesson = o.rate * o.seconds;
  const hostileRefs: string[] = [];
  let tick = 0;
  const hostileTimer = setInterval(() => {
    const ref = `h${tick++}`;
    hostileRefs.push(ref);
    h.send({ type: 'board.op', ref, op: { type: 'element.add', elements: [rect(`h${tick}`)] } });
  }, 100);
  await Promise.all(
    clients.map(async (c, k) => {
      for (let i = 0; i < perLesson; i++) {
        c.send({ type: 'board.op', ref: `o${i}`, op: { type: 'element.add', elements: [rect(`e${k}-${i}`, { x: i })] } });
        await new Promise((r) => setTimeout(r, 1000 / o.rate));
      }
    }),
  );
  clearInterval(hostileTimer);
  const answers = await Promise.all(clients.flatMap((c) => Array.from({ length: perLesson }, (_, i) => answered(c, `o${i}`))));
  const hostileAnswers = await Promise.all(hostileRefs.map((ref) => answered(h, ref)));
  await Promise.all([h, ...clients].map((c) => c.close()));
  return {
    total: answers.length,
    refused: answers.filter((m) => m.type === 'board.reject').length,
    hostile: hostileAnswers,
    hostileLesson: hostile.lesson.id,
  };
}

describe('one lesson never fails another', () => {
  it("acknowledges every operation of another partner's lessons while one lesson's commit fails for good, and refuses only that lesson's", async () => {
    const r = await hostileScenario(suiteOrFull({ lessons: 8, rate: 10, seconds: 2 }, { lessons: 30, rate: 10, seconds: 8 }));
    console.log(`refused operations of the other partner: ${r.refused} of ${r.total}; hostile lesson: ${r.hostile.filter((m) => m.type === 'board.reject').length} of ${r.hostile.length} refused`);
    expect(r.refused).toBe(0);
    expect(r.hostile.length).toBeGreaterThan(0);
    for (const m of r.hostile) expect(m).toMatchObject({ type: 'board.reject', code: 'unavailable' });
    const failures = await registry.getSingleMetricAsString('lessons_board_commit_failures_total');
    const lessonFailures = Number(/cause="lesson"\} (\d+)/.exec(failures)?.[1]);
    expect(lessonFailures).toBeGreaterThan(0);
    expect(/cause="transient"\} (\d+)/.exec(failures)?.[1]).toBe('0');
    await sql`DELETE FROM test_poisoned`;
    await sql`DROP TRIGGER test_busy ON board_elements`;
  }, 120_000);

  it('deletes a page whose element stands at the highest version: the tombstone stays in range and the commit succeeds', async () => {
    const f = await lessonWithLinks(sql);
    const t = await join(gw.wsUrl(await f.link('t', { role: 'teacher' })));
    t.send({ type: 'board.op', ref: 'p', op: { type: 'page.add', page: { id: 'p2', name: 'Two' }, after_page_id: null } });
    t.send({ type: 'board.op', ref: 'a', op: { type: 'element.add', elements: [rect('top', { page_id: 'p2' })] } });
    expect((await answered(t, 'a')).type).toBe('board.ack');
    // an element stored at the top of the range (as any board written before versions were bounded may hold)
    await sql`UPDATE board_elements SET version = ${MAX_VERSION}, data = jsonb_set(data, '{version}', ${String(MAX_VERSION)}::jsonb) WHERE lesson_id = ${f.lesson.id} AND element_id = 'top'`;
    t.send({ type: 'board.op', ref: 'd', op: { type: 'page.delete', page_id: 'p2' } });
    expect(await answered(t, 'd')).toMatchObject({ type: 'board.ack' });
    const [row] = await sql<{ version: number; deleted: boolean }[]>`SELECT version, deleted FROM board_elements WHERE lesson_id = ${f.lesson.id} AND element_id = 'top'`;
    expect(row).toEqual({ version: MAX_VERSION, deleted: true });
    await t.close();
  }, 30_000);
});
