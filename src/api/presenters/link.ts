import { z } from 'zod';
import type { IssuedLink, LinkInfo } from '../../domain/links.js';
import { RoleSchema } from '../../domain/enums.js';
import { personRef } from '../../domain/people.js';
import { iso } from './lesson.js';

const PERSON = "the partner's reference to the person (psn_…): the same user.id gives the same reference in every lesson of the partner; attendance and removal use it";

export const LinkSchema = z
  .object({
    id: z.string().describe('lnk_…: the link in attendance, GET /lessons/{id}/links and DELETE /lessons/{id}/links/{link_id}'),
    person: z.string().describe(PERSON),
    url: z.url().describe('{embed_base}/embed/<token>: give it to this participant only, right before entry'),
    token: z.string(),
    expires_at: z.iso.datetime(),
  })
  .meta({ id: 'ParticipantLink' });

export function presentLink(l: IssuedLink): z.infer<typeof LinkSchema> {
  return { id: l.id, person: l.person, url: l.url, token: l.token, expires_at: l.expires_at.toISOString() };
}

export const LinkInfoSchema = z
  .object({
    id: z.string(),
    person: z.string().describe(PERSON),
    name: z.string(),
    role: RoleSchema,
    created_at: z.iso.datetime(),
    expires_at: z.iso.datetime(),
    revoked_at: z.iso.datetime().nullable().describe('when DELETE /lessons/{id}/links/{link_id} revoked it; null while not revoked'),
    last_used_at: z.iso.datetime().nullable().describe('the latest time the person became present through it; null if never'),
  })
  .meta({ id: 'LinkInfo' });

export function presentLinkInfo(l: LinkInfo): z.infer<typeof LinkInfoSchema> {
  return {
    id: l.id,
    person: personRef(l.user_hash),
    name: l.name,
    role: l.role,
    created_at: l.created_at.toISOString(),
    expires_at: l.expires_at.toISOString(),
    revoked_at: iso(l.revoked_at),
    last_used_at: iso(l.last_used_at),
  };
}
