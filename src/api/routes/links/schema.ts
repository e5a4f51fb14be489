import { z } from 'zod';
import { RoleSchema } from '../../../domain/enums.js';
import { LINK_TTL_MINUTES_MAX } from '../../../domain/links.js';

export const LinksCreateSchema = z
  .object({
    user: z.object({
      id: z.string().min(1).max(128),
      name: z.string().min(1).max(60),
      role: RoleSchema,
    }),
    ttl_minutes: z.number().int().min(15).max(LINK_TTL_MINUTES_MAX).default(180),
  })
  .meta({ id: 'LinkCreate' });

/** A link of a lesson; an id no link can have is simply not found. */
export const LinkParams = z.object({ id: z.string().min(1).max(64), link_id: z.string().min(1).max(64) }).describe('Link');
