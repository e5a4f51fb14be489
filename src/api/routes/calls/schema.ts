import { z } from 'zod';
import { queryNumber } from '../queryNumber.js';
import { ReportPeriodQuery } from '../usage/schema.js';

export const CALLS_DEFAULT_LIMIT = 100;
export const CALLS_MAX_LIMIT = 1000;
/** Deep OFFSET costs a linear index walk; a million is far beyond a year of one partner's calls. */
export const CALLS_MAX_OFFSET = 1_000_000;

export const CallsQuery = ReportPeriodQuery.extend({
  limit: queryNumber(z.number().int().min(1).max(CALLS_MAX_LIMIT).default(CALLS_DEFAULT_LIMIT))
    .describe(`page size, 1-${CALLS_MAX_LIMIT}, default ${CALLS_DEFAULT_LIMIT}`),
  offset: queryNumber(z.number().int().min(0).max(CALLS_MAX_OFFSET).default(0))
    .describe(`calls to skip, 0-${CALLS_MAX_OFFSET}, default 0`),
});
