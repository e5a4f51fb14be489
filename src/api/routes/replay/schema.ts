import { z } from 'zod';
import { LINK_TTL_MINUTES_MAX } from '../../../domain/replay.js';
import { queryNumber } from '../queryNumber.js';

export const HistoryQuery = z.object({
  after_seq: queryNumber(z.number().int().min(0).default(0)).describe('the last seq already read; 0 for the first operation'),
  limit: queryNumber(z.number().int().min(1).max(1000).default(500)).describe('page size, 1-1000'),
});

export const ReplayLinkCreateSchema = z
  .object({ ttl_minutes: z.number().int().min(15).max(LINK_TTL_MINUTES_MAX).default(180) })
  .meta({ id: 'ReplayLinkCreate' });
