import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { suiteOrFull } from '../helpers/length.js';
import { randomSession } from './random.js';
import { ARTIFACTS, startSession } from './session.js';

/**
 * The randomised two-person session (test/board/random.ts) with a fixed small
 * budget; `npm run soak:board -- --actions 200 --seed N` runs long ones, and
 * replays a failure printed here with its seed.
 */
const s = await startSession();
const SEED = Number(process.env.BOARD_RANDOM_SEED ?? 20261123);
/** npm run test:full: 60 */
const ACTIONS = suiteOrFull(30, 60);

describe('a randomised two-person session', () => {
  it(`converges: both screens and the snapshot hold the same elements on every page (seed ${SEED}, ${ACTIONS} actions)`, async () => {
    console.log(`random session: seed=${SEED} actions=${ACTIONS} (replay: npm run soak:board -- --seed ${SEED} --actions ${ACTIONS})`);
    const { lesson, teacher, student } = await s.lesson();
    const a = await s.open(teacher.url);
    const b = await s.open(student.url);
    const out = await randomSession({
      people: [
        { page: a, url: teacher.url, role: 'teacher' },
        { page: b, url: student.url, role: 'student' },
      ],
      seed: SEED,
      actions: ACTIONS,
      snapshot: () => s.snapshot(lesson.id),
    });
    console.log(`random session: ${out.elements} elements on ${out.pages} pages; ${out.log.filter((l) => !/skipped|nothing|disabled|not a teacher|no button/.test(l)).length} actions took effect`);
    await a.screenshot({ path: path.join(ARTIFACTS, 'random-teacher.png') });
    await b.screenshot({ path: path.join(ARTIFACTS, 'random-student.png') });
    expect(out.elements).toBeGreaterThan(0);
    expect([...a.errors, ...b.errors]).toEqual([]);
    await a.context().close();
    await b.context().close();
  }, 150_000);
});
