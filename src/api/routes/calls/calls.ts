import { getCallsReport } from '../../../reports/calls.js';
import { CallsReportSchema, presentCalls } from '../../presenters/calls.js';
import { defineRoute } from '../../route.js';
import { CallsQuery } from './schema.js';

export const callsRoutes = [
  defineRoute({
    method: 'get',
    path: '/calls',
    operationId: 'getCalls',
    tag: 'Balance and usage',
    summary: 'Call details: one item per session, newest first, with totals over the whole period',
    description:
      'Sessions are selected by the Moscow day they started on; period rules as for /usage. ' +
      'limit/offset out of bounds answer 422. Rules: docs/reports.md.',
    query: CallsQuery,
    responses: { 200: { description: 'Call details report', schema: CallsReportSchema } },
    errors: ['bad_range', 'validation_error'],
    async handler(ctx, { query }) {
      const { deps, auth } = ctx.state;
      const { limit, offset, ...period } = query;
      ctx.body = presentCalls(await getCallsReport(deps.sql, auth.partner.id, period, { limit, offset }, deps.clock.now()));
    },
  }),
];
