import { z } from 'zod';
import { queryNumber } from '../queryNumber.js';

export const EventsListQuery = z.object({
  after: queryNumber(z.number().int().min(0).default(0)).describe('the last event id already processed; 0 for the oldest'),
  limit: queryNumber(z.number().int().min(1).max(1000).default(100)).describe('page size, 1-1000'),
});

export const EventIdParams = z.object({ id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER) }).describe('Event');
