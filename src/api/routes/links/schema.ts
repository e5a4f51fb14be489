import { z } from 'zod';

export const LinksCreateSchema = z
  .object({
    user: z.object({
      id: z.string().min(1).max(128),
      name: z.string().min(1).max(60),
      role: z.enum(['teacher', 'student']),
    }),
    ttl_minutes: z.number().int().min(15).max(720).default(180),
  })
  .meta({ id: 'LinkCreate' });
