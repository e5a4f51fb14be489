import { afterAll, describe, expect, it } from 'vitest';
import { recordPresenceMarks } from '../../src/domain/attendance.js';
import { createLogger } from '../../src/logger.js';
import { recordParticipantsJoined, type ParticipantJoin } from '../../src/metering/participants.js';
import { JoinAnnouncer } from '../../realtime/metering/JoinAnnouncer.js';
import { PresenceLog } from '../../realtime/metering/PresenceLog.js';
import { makeDeps } from '../helpers/deps.js';
import { isolatedEnv } from '../helpers/isolation.js';
import { eventsOf } from '../helpers/lessons.js';
import { poisonLesson } from '../helpers/poison.js';
import { lessonWithLinks } from './helpers/fixtures.js';

/**
 * The gateway's batched writes of many lessons (participant.joined, attendance's presence marks)
 * against one lesson whose rows Postgres refuses for good (a trigger raises 22003, as an
 * out-of-range value would): the other lessons' items in the same batches are written, the refused
 * one is dropped and logged with its lesson instead of being kept and tried again for ever.
 * Real Postgres, a database of the file's own (the trigger would refuse rows of other files).
 */
const deps = makeDeps({ env: await isolatedEnv() });
const sql = deps.sql;
afterAll(() => deps.close());

const lines: { msg: string; lesson_id?: string }[] = [];
const log = createLogger('info', { write: (l: string) => void lines.push(JSON.parse(l)) });
const quick = { waits: [10, 10], againMs: 50 };

describe('batched writes of many lessons', () => {
  it('writes every other lesson\'s participant.joined in the batch, and drops the one Postgres refuses for good, logged with its lesson', async () => {
    const hostile = await lessonWithLinks(sql);
    const others = await Promise.all([1, 2, 3, 4].map(() => lessonWithLinks(sql)));
    await poisonLesson(sql, 'participant_joins', hostile.lesson.id);
    const announcer = new JoinAnnouncer((batch) => recordParticipantsJoined(sql, batch), log, async () => {}, quick);
    let refused = 0;
    announcer.onRefused = () => refused++;
    const join = (l: (typeof others)[number], who: string): ParticipantJoin => ({
      lessonId: l.lesson.id, partnerId: l.partner.id, externalId: null, userHash: `h-${who}`, role: 'student', name: who, linkId: 'lnk_x', at: new Date(),
    });
    // one batch: the hostile lesson's arrival among the others'
    for (const [i, l] of [...others.slice(0, 2), hostile, ...others.slice(2)].entries()) announcer.add(join(l, `p${i}`));
    await announcer.idle();
    for (const l of others) expect((await eventsOf(sql, l.partner.id, 'participant.joined')).length, l.lesson.id).toBe(1);
    expect(await eventsOf(sql, hostile.partner.id, 'participant.joined')).toEqual([]);
    expect(lines.filter((l) => l.lesson_id === hostile.lesson.id).map((l) => l.msg)).toEqual(['participant.joined: one refused by Postgres for good, not recorded']);
    expect(refused).toBe(1); // the gateway counts it (lessons_gateway_writes_refused_total)
    // not kept for a later try: nothing is written or logged again
    await new Promise((r) => setTimeout(r, 200));
    await announcer.idle();
    expect(lines.filter((l) => /kept for a later try/.test(l.msg))).toEqual([]);
    announcer.close();
  });

  it('writes every other lesson\'s presence marks in the batch, and drops the one Postgres refuses for good, logged with its lesson', async () => {
    const hostile = await lessonWithLinks(sql);
    const others = await Promise.all([1, 2, 3].map(() => lessonWithLinks(sql)));
    await poisonLesson(sql, 'presence_marks', hostile.lesson.id);
    const presenceLog = new PresenceLog((batch) => recordPresenceMarks(sql, batch), log, quick);
    let refused = 0;
    presenceLog.onRefused = () => refused++;
    for (const l of [others[0], hostile, ...others.slice(1)]) presenceLog.add({ lessonId: l.lesson.id, personId: 'p1', joined: true, linkId: null, at: new Date() });
    await presenceLog.idle();
    const written = await sql<{ lesson_id: string }[]>`SELECT lesson_id FROM presence_marks`;
    expect(written.map((r) => r.lesson_id).sort()).toEqual(others.map((l) => l.lesson.id).sort());
    expect(lines.filter((l) => l.lesson_id === hostile.lesson.id).map((l) => l.msg)).toEqual(['presence marks: one refused by Postgres for good, not recorded']);
    expect(refused).toBe(1);
    presenceLog.close();
  });
});
