import { z } from 'zod';
import { BoardOpSchema } from '../../board/schema.js';
import { RoleSchema } from '../../domain/enums.js';
import type { HistoryItem, IssuedReplayLink } from '../../domain/replay.js';

export const HistoryEntrySchema = z
  .object({
    seq: z.number().int().describe("the operation's place in the board's order (the snapshot's `seq` after it)"),
    at: z.iso.datetime().describe('when it was committed'),
    person: z.string().nullable().describe("the author: the partner's reference to the person (psn_…), as in attendance"),
    person_id: z.string().nullable().describe("the author's id in this lesson (as on the participant page)"),
    role: RoleSchema.describe("the author's role"),
    op: BoardOpSchema.describe('the operation as the board applied it (writes that lost to a newer version left out)'),
  })
  .meta({ id: 'BoardHistoryEntry' });

export function presentHistoryEntry(e: HistoryItem): z.infer<typeof HistoryEntrySchema> {
  return { seq: e.seq, at: e.at, person: e.person, person_id: e.person_id, role: e.role as z.infer<typeof RoleSchema>, op: e.op };
}

export const ReplayLinkSchema = z
  .object({
    id: z.string().describe('rpl_…'),
    url: z.url().describe('{embed_base}/replay/<token>: the read-only replay page'),
    token: z.string(),
    expires_at: z.iso.datetime(),
  })
  .meta({ id: 'ReplayLink' });

export function presentReplayLink(l: IssuedReplayLink): z.infer<typeof ReplayLinkSchema> {
  return { id: l.id, url: l.url, token: l.token, expires_at: l.expires_at.toISOString() };
}
