import { z } from 'zod';

export const EventsListQuery = z.object({
  after: z.coerce.number().int().min(0).default(0).describe('the last event id already processed; 0 for the oldest'),
  limit: z.coerce.number().int().min(1).max(1000).default(100).describe('page size, 1-1000'),
});

export const EventIdParams = z.object({ id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER) }).describe('Event');
