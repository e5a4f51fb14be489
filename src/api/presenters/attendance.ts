import { z } from 'zod';
import type { Attendance, AttendingPerson } from '../../domain/attendance.js';
import { RoleSchema } from '../../domain/enums.js';
import { iso } from './lesson.js';

export const AttendingPersonSchema = z
  .object({
    person: z.string().describe("the partner's reference to the person (psn_…): the same user.id gives the same reference in every lesson of the partner; also returned when the link is issued"),
    role: RoleSchema.describe('as on the latest link the person came through'),
    name: z.string().describe('as on the latest link the person came through'),
    link_ids: z.array(z.string()).describe('the links the person came through in these intervals (POST /lessons/{id}/links returns each id)'),
    intervals: z
      .array(
        z.object({
          joined_at: z.iso.datetime().describe('the person became present (their first tab or device connected)'),
          left_at: z.iso.datetime().nullable().describe('the person stopped being present (their last connection went, dated as metering dates it); null while present'),
        }),
      )
      .describe('oldest first; a person with several tabs is present while any of them is'),
    present_seconds: z.number().int().describe('sum of the intervals, open ones counted up to now, rounded down to the second'),
  })
  .meta({ id: 'AttendingPerson' });

export const AttendanceSchema = z
  .object({
    lesson_id: z.string(),
    sessions: z
      .array(
        z.object({
          id: z.string().describe('the id of the session in GET /calls'),
          started_at: z.iso.datetime(),
          ended_at: z.iso.datetime().nullable().describe('null while the session is going'),
          going: z.boolean(),
          seconds: z.number().int().describe("metered time, as GET /calls: the time two or more of the people's intervals overlap"),
          people: z.array(AttendingPersonSchema).describe('everyone present from the end of the session before (when the lesson was empty) to the end of this one'),
        }),
      )
      .describe('oldest first; with session_id, that session only'),
    outside_sessions: z
      .array(AttendingPersonSchema)
      .describe('people present after the last session ended while no session runs (for instance one person waiting alone; not metered); empty with session_id'),
  })
  .meta({ id: 'Attendance' });

function presentPerson(p: AttendingPerson): z.infer<typeof AttendingPersonSchema> {
  return {
    person: p.person,
    role: p.role,
    name: p.name,
    link_ids: p.link_ids,
    intervals: p.intervals.map((i) => ({ joined_at: i.joined_at.toISOString(), left_at: iso(i.left_at) })),
    present_seconds: p.present_seconds,
  };
}

export function presentAttendance(lessonId: string, a: Attendance): z.infer<typeof AttendanceSchema> {
  return {
    lesson_id: lessonId,
    sessions: a.sessions.map((s) => ({
      id: String(s.id),
      started_at: s.started_at.toISOString(),
      ended_at: iso(s.ended_at),
      going: s.ended_at === null,
      seconds: s.seconds,
      people: s.people.map(presentPerson),
    })),
    outside_sessions: a.outside_sessions.map(presentPerson),
  };
}
