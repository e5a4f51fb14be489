import { createHash } from 'node:crypto';

/**
 * A person's public id in one lesson: derived from the lesson and the keyed
 * user hash, so it is stable across tabs and reconnects, different in every
 * lesson, and reveals nothing of the partner's user id. The participant page
 * shows it; removals and presence marks are keyed by it.
 */
export function publicPersonId(lessonId: string, userHash: string): string {
  return createHash('sha256').update(`${lessonId}:${userHash}`).digest('base64url').slice(0, 16);
}

/**
 * The partner's reference to a person (`psn_` + 22 characters): derived from
 * the keyed user hash alone, so the same `user.id` gives the same reference in
 * every lesson of that partner and an unrelated one at another partner. The
 * partner learns it when it issues a link and matches it to its own user; the
 * service keeps no user id (docs/api-decisions.md, "People").
 */
export function personRef(userHash: string): string {
  return `psn_${createHash('sha256').update(`person:${userHash}`).digest('base64url').slice(0, 22)}`;
}

/** The shape of a person reference: a path parameter that cannot be one names nobody. */
export const PERSON_REF = /^psn_[A-Za-z0-9_-]{22}$/;
