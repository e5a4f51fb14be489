import { readAttendance } from '../../../domain/attendance.js';
import { getLiveLesson } from '../../../domain/lessons.js';
import { Errors } from '../../../errors.js';
import { AttendanceSchema, presentAttendance } from '../../presenters/attendance.js';
import { defineRoute, LessonIdParams } from '../../route.js';
import { AttendanceQuery } from './schema.js';

export const attendanceRoutes = [
  defineRoute({
    method: 'get',
    path: '/lessons/{id}/attendance',
    operationId: 'getAttendance',
    tag: 'Attendance',
    summary: 'Who was present in each session, when, and through which link',
    description:
      'Intervals come from the same presence that meters the lesson: a session\'s `seconds` is the time two or more of its people\'s intervals overlap. ' +
      'A running session has open intervals (`left_at: null`).',
    params: LessonIdParams,
    query: AttendanceQuery,
    responses: { 200: { description: 'Attendance', schema: AttendanceSchema } },
    errors: ['not_found', 'archived', 'validation_error'],
    async handler(ctx, { params, query }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      const attendance = await readAttendance(deps.readSql, lesson.id, deps.clock.now(), query.session_id === undefined ? undefined : Number(query.session_id));
      if (!attendance) throw Errors.notFound('Session');
      ctx.body = presentAttendance(lesson.id, attendance);
    },
  }),
];
