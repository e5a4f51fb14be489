import { describe, expect, it } from 'vitest';
import { ensureSessionStarted, ensureSessionsStarted } from '../../src/metering/sessions.js';
import { fileDeps, secondsAfter } from '../helpers/deps.js';
import { partnerFactory } from '../helpers/factories.js';
import { eventsOf, lessonFactory } from '../helpers/lessons.js';

const deps = fileDeps();
const { sql } = deps;

const T0 = new Date('2026-03-10T10:00:00Z');
const at = secondsAfter(T0);

describe('batched session starts (the gateway starts a burst of sessions in one transaction)', () => {
  it('starts each lesson once at its own moment, adopts running sessions, skips deleted lessons, one lesson.started each', async () => {
    const { partner: a } = await partnerFactory(sql);
    const { partner: b } = await partnerFactory(sql);
    const fresh = await Promise.all([lessonFactory(sql, a, { external_id: 'b1' }), lessonFactory(sql, b, { external_id: 'b2' }), lessonFactory(sql, a)]);
    const running = await lessonFactory(sql, b);
    const before = await ensureSessionStarted(sql, { lessonId: running.id, at: T0, people: 2 });
    const deleted = await lessonFactory(sql, a);
    await sql`UPDATE lessons SET archived_at = ${at(1)} WHERE id = ${deleted.id}`;

    const out = await ensureSessionsStarted(
      sql,
      [
        { lessonId: fresh[0].id, at: at(10), people: 2 },
        { lessonId: fresh[1].id, at: at(11), people: 3 },
        { lessonId: running.id, at: at(12), people: 5 },
        { lessonId: deleted.id, at: at(13), people: 2 },
        { lessonId: fresh[2].id, at: at(14), people: 2 },
        { lessonId: fresh[0].id, at: at(15), people: 4 }, // the same lesson again: adopts the session just started
        { lessonId: 'les_missing', at: at(16), people: 2 },
      ],
      { skipArchived: true },
    );
    expect(out.map((r) => r?.started)).toEqual([true, true, false, undefined, true, false, undefined]);
    expect(out[5]!.session.id).toBe(out[0]!.session.id);
    expect(out[2]!.session.id).toBe(before.session.id);
    expect(out[0]!.session.started_at).toEqual(at(10));
    // a session started by the batch counts the most people any of its inputs saw
    const [first] = await sql`SELECT people_max FROM sessions WHERE id = ${out[0]!.session.id}`;
    expect(first.people_max).toBe(4);
    expect(out[1]!.session).toMatchObject({ lesson_id: fresh[1].id, partner_id: b.id, started_at: at(11), people_max: 3, ended_at: null });
    const [raised] = await sql`SELECT people_max FROM sessions WHERE id = ${before.session.id}`;
    expect(raised.people_max).toBe(5);
    expect(await sql`SELECT id FROM sessions WHERE lesson_id = ${deleted.id}`).toHaveLength(0);
    const [l0] = await sql`SELECT started_at, ended_at FROM lessons WHERE id = ${fresh[0].id}`;
    expect(l0).toEqual({ started_at: at(10), ended_at: null });

    const startedA = await eventsOf(sql, a.id, 'lesson.started');
    expect(startedA.map((e) => e.data)).toEqual([
      { lesson_id: fresh[0].id, external_id: 'b1', started_at: at(10).toISOString(), ended_at: null, minutes: 0 },
      { lesson_id: fresh[2].id, external_id: null, started_at: at(14).toISOString(), ended_at: null, minutes: 0 },
    ]);
    expect(startedA.map((e) => e.created_at)).toEqual([at(10), at(14)]);
    const startedB = await eventsOf(sql, b.id, 'lesson.started');
    expect(startedB.map((e) => e.data.lesson_id)).toEqual([running.id, fresh[1].id]);
  });

  it("commits a started session with the lesson's meter snapshot naming it; an adopted session's snapshot is left to its own writers", async () => {
    const { partner } = await partnerFactory(sql);
    const [fresh, running] = await Promise.all([lessonFactory(sql, partner), lessonFactory(sql, partner)]);
    await ensureSessionStarted(sql, { lessonId: running.id, at: T0, people: 2 });
    const meter = (since: Date | null) => ({ seq: 7, accMs: 1500, runningSince: since, emptySince: null, people: 2, at: at(20) });
    const [started, adopted] = await ensureSessionsStarted(sql, [
      { lessonId: fresh.id, at: at(20), people: 2, meter: meter(at(20)) },
      { lessonId: running.id, at: at(20), people: 2, meter: meter(at(20)) },
    ]);
    const rows = await sql`SELECT lesson_id, seq, session_id, acc_ms, running_since, people FROM lesson_meters WHERE lesson_id IN ${sql([fresh.id, running.id])}`;
    expect(rows).toEqual([{ lesson_id: fresh.id, seq: 7, session_id: started!.session.id, acc_ms: 1500, running_since: at(20), people: 2 }]);
    expect(adopted!.started).toBe(false);
  });

  it('starts a deleted lesson\'s session decided before the deletion (it ran then), not one decided at or after it', async () => {
    const { partner } = await partnerFactory(sql);
    const before = await lessonFactory(sql, partner);
    const at_ = await lessonFactory(sql, partner);
    for (const l of [before, at_]) await sql`UPDATE lessons SET archived_at = ${at(20)} WHERE id = ${l.id}`;
    const out = await ensureSessionsStarted(
      sql,
      [
        { lessonId: before.id, at: at(19), people: 2 },
        { lessonId: at_.id, at: at(20), people: 2 },
      ],
      { skipArchived: true },
    );
    expect(out.map((r) => r?.started)).toEqual([true, undefined]);
    expect(out[0]!.session).toMatchObject({ lesson_id: before.id, started_at: at(19), ended_at: null });
  });

  it('two batches racing over the same lessons start each once', async () => {
    const { partner } = await partnerFactory(sql);
    const lessons = await Promise.all(Array.from({ length: 8 }, () => lessonFactory(sql, partner)));
    const inputs = lessons.map((l, i) => ({ lessonId: l.id, at: at(i), people: 2 }));
    const [x, y] = await Promise.all([ensureSessionsStarted(sql, inputs), ensureSessionsStarted(sql, [...inputs].reverse())]);
    const started = [...x, ...y].filter((r) => r?.started);
    expect(started).toHaveLength(8);
    expect(await eventsOf(sql, partner.id, 'lesson.started')).toHaveLength(8);
  });
});
