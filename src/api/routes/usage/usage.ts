import { Readable } from 'node:stream';
import { getUsageReport } from '../../../reports/usage.js';
import { renderUsage, UsageReportSchema } from '../../presenters/usage.js';
import { defineRoute } from '../../route.js';
import { UsageQuery } from './schema.js';

export const usageRoutes = [
  defineRoute({
    method: 'get',
    path: '/usage',
    operationId: 'getUsage',
    tag: 'Balance and usage',
    summary: 'Metered and charged seconds per lesson per Moscow day',
    description:
      'Period: Moscow days from..to inclusive, at most one year; default the last 30 days. ' +
      'A session that crosses Moscow midnight is split between the two days to the second. ' +
      'Running sessions are included up to their last charge. The body is streamed (chunked); ' +
      'a failure after the first byte aborts the connection, so a complete body is always a complete report. ' +
      'Rules: docs/reports.md.',
    query: UsageQuery,
    responses: { 200: { description: 'Usage report', schema: UsageReportSchema } },
    errors: ['bad_range'],
    async handler(ctx, { query }) {
      const { deps, auth } = ctx.state;
      const report = await getUsageReport(deps.sql, auth.partner.id, query, deps.clock.now());
      const body = Readable.from(renderUsage(report));
      // Koa pipes the body with stream.pipeline: an error here destroys the
      // socket (the client sees an aborted transfer, never a short valid JSON).
      // When the body is compressed, koa-compress pipes it with .pipe(), which does not pass the error on:
      // the socket is destroyed here so a failure never ends in a complete-looking response.
      body.on('error', (err) => {
        deps.log.error({ component: 'reports', err, request_id: ctx.state.requestId }, 'usage report aborted');
        ctx.res.destroy();
      });
      ctx.type = 'application/json';
      ctx.body = body;
    },
  }),
];
