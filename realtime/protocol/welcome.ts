import type { Config } from '../../src/config.js';
import type { ResolvedLink } from '../../src/domain/links.js';
import type { PublicPerson } from '../presence/Presence.js';

/**
 * The first frame a participant gets (schema: WelcomeMessage in
 * serverMessages.ts). Feature fields come first so they can never replace
 * the protocol's own. `people` are the present people's JSON as presence
 * stores them (one PublicPerson each, written by JSON.stringify): spliced in
 * as they are, not parsed and serialised again on every arrival.
 */
export function welcomeFrame(conn: { link: ResolvedLink; person: PublicPerson }, people: string[], seq: number, extras: Record<string, unknown>, c: Config): string {
  const l = conn.link;
  const body = JSON.stringify({
    ...extras,
    type: 'welcome',
    protocol: 1,
    seq,
    you: conn.person,
    lesson: { id: l.lesson_id, title: l.lesson_title, mode: l.lesson_mode, subject_mode: l.subject_mode },
    limits: {
      max_payload_bytes: c.GATEWAY_MAX_PAYLOAD_BYTES,
      messages_per_second: c.GATEWAY_MESSAGES_PER_SECOND,
      message_burst: c.GATEWAY_MESSAGE_BURST,
      idle_timeout_seconds: c.GATEWAY_IDLE_TIMEOUT_SECONDS,
      cursors_per_second: c.GATEWAY_PERSON_CURSORS_PER_SECOND,
    },
  });
  return `${body.slice(0, -1)},"people":[${people.join(',')}]}`;
}
