import { getUsageReport } from '../../../reports/usage.js';
import { presentUsage, UsageReportSchema } from '../../presenters/usage.js';
import { defineRoute } from '../../route.js';
import { UsageQuery } from './schema.js';

export const usageRoutes = [
  defineRoute({
    method: 'get',
    path: '/usage',
    tag: 'Balance and usage',
    summary: 'Metered and charged seconds per lesson per Moscow day',
    description:
      'Period: Moscow days from..to inclusive, at most one year; default the last 30 days. ' +
      'A session that crosses Moscow midnight is split between the two days to the second. ' +
      'Running sessions are included up to their last charge. Rules: docs/reports.md.',
    query: UsageQuery,
    responses: { 200: { description: 'Usage report', schema: UsageReportSchema } },
    errors: ['bad_range', 'validation_error'],
    async handler(ctx, { query }) {
      const { deps, auth } = ctx.state;
      ctx.body = presentUsage(await getUsageReport(deps.sql, auth.partner.id, query, deps.clock.now()));
    },
  }),
];
