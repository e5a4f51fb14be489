import { z } from 'zod';

export const AttendanceQuery = z.object({
  session_id: z.string().regex(/^[1-9][0-9]{0,17}$/).optional().describe('one session only (its id in GET /calls); an unknown one is 404 not_found'),
});
