import { publicPersonId } from '../../src/domain/people.js';
import type { ResolvedLink } from '../../src/domain/links.js';

const personIds = new WeakMap<ResolvedLink, string>();

/**
 * publicPersonId of a link's person, hashed once per link object (Admission
 * caches one per token; the upgrade's checks, the connection and the
 * features share it).
 */
export function personIdOf(link: ResolvedLink): string {
  let id = personIds.get(link);
  if (id === undefined) personIds.set(link, (id = publicPersonId(link.lesson_id, link.user_hash)));
  return id;
}
