import { z } from 'zod';
import type { IssuedLink } from '../../domain/links.js';

export const LinkSchema = z
  .object({
    url: z.url().describe('{embed_base}/embed/<token>: give it to this participant only, right before entry'),
    token: z.string(),
    expires_at: z.iso.datetime(),
  })
  .meta({ id: 'ParticipantLink' });

export function presentLink(l: IssuedLink): z.infer<typeof LinkSchema> {
  return { url: l.url, token: l.token, expires_at: l.expires_at.toISOString() };
}
