import { ClientMessages } from '../../protocol/clientMessages.js';
import type { Deps } from '../../../src/deps.js';
import type { ClientConnection } from '../../ClientConnection.js';
import { defineMessage, type GatewayApi, type GatewayFeature } from '../api.js';
import type { Refusal } from '../../admission/Admission.js';
import { callAllowed, PERSON_ID } from '../call/feature.js';
import { mediaStateFrame, type MediaStates } from '../call/media.js';
import { errorFrame } from '../../protocol/errors.js';
import type { Removals } from './removals.js';
import { personIdOf } from '../../admission/personId.js';

export const removedRefusal: Refusal = { ok: false, status: 403, code: 'removed', message: 'You were removed from this lesson' };

/** Teachers only; the target must be someone else, with a well-formed id. False (and an error frame) otherwise. */
function teacherMay(conn: ClientConnection, type: string, target: string): boolean {
  if (conn.person.role !== 'teacher') {
    conn.send(errorFrame('forbidden', 'only a teacher can do that', type));
    return false;
  }
  if (!PERSON_ID.test(target) || target === conn.person.id) {
    conn.send(errorFrame('not_found', 'no such participant in this lesson', type));
    return false;
  }
  return true;
}

/**
 * Teacher rights, enforced by the gateway (docs/protocol.md, "Teacher
 * actions"; pinning is a board operation, enforced by the BoardService):
 *
 * - `teacher.mute`: turns a student's camera and/or microphone off and
 *   blocks them. Every page is told at once (`media.state` off, `*_blocked`),
 *   whatever the student's page does; pages play a person's audio and video
 *   only while the gateway reports them on, and the gateway never reports a
 *   blocked kind on. The student gets `muted`.
 * - `teacher.unmute`: lifts the block; the student gets `unmuted` and may
 *   turn it on again (the gateway never turns anyone's microphone on).
 * - `teacher.remove`: stored in Postgres first, then the person's sockets
 *   close with 4403 on every node; their links issued until then are refused
 *   at the upgrade (403) and at /embed (the "removed" page). The close goes
 *   over the bus (at once) and, since a bus message can be lost, every node
 *   also closes the person's sockets here when Postgres's notification of the
 *   removal arrives (`closeRemoved`).
 *
 * A teacher may mute students (not other teachers) and remove any other
 * participant (the spec: "remove participants").
 */
export function teacherFeature(deps: Deps, media: MediaStates, removals: Removals): GatewayFeature {
  const log = deps.log.child({ component: 'teacher' });
  let gw: GatewayApi | undefined;

  /** A removal heard from Postgres: this node's sockets of the person whose links it covers close with 4403. */
  const closeRemoved = (lessonId: string, personId: string): void => {
    const conns = gw?.localPerson(lessonId, personId)?.conns;
    if (!conns?.length) return;
    for (const conn of [...conns])
      removals.isRemoved(conn.link, true).then(
        (removed) => {
          if (removed) conn.close('forbidden');
        },
        (err) => log.warn({ err: (err as Error).message, lesson_id: lessonId }, 'removal check failed: the socket closes by the bus, or when the LISTEN connection reconnects'),
      );
  };

  const mute = (kind: 'teacher.mute' | 'teacher.unmute') =>
    defineMessage({
      type: kind,
      schema: ClientMessages[kind],
      description:
        kind === 'teacher.mute'
          ? "Teacher: turn a student's camera and/or microphone off and block them (full lessons)."
          : 'Teacher: allow a student to turn their camera and/or microphone on again (full lessons).',
      async handle({ conn, gateway }, msg: { participant_id: string; camera: boolean; mic: boolean }) {
        if (!callAllowed(conn, kind) || !teacherMay(conn, kind, msg.participant_id)) return;
        if (!msg.camera && !msg.mic) return;
        const what = { camera: msg.camera, mic: msg.mic };
        const s = kind === 'teacher.mute' ? await media.block(conn.lessonId, msg.participant_id, what) : await media.unblock(conn.lessonId, msg.participant_id, what);
        if (s === 'teacher') {
          conn.send(errorFrame('forbidden', 'teachers cannot be muted', kind));
          return;
        }
        gateway.broadcast(conn.lessonId, mediaStateFrame(msg.participant_id, s));
        gateway.toPerson(conn.lessonId, msg.participant_id, JSON.stringify({ type: kind === 'teacher.mute' ? 'muted' : 'unmuted', ...what, by: conn.person.name }));
      },
    });

  const remove = defineMessage({
    type: 'teacher.remove',
    schema: ClientMessages['teacher.remove'],
    description: 'Teacher: remove a participant. Their sockets close with 4403 and their link cannot enter the lesson again.',
    async handle({ conn, gateway, now }, msg) {
      if (!teacherMay(conn, 'teacher.remove', msg.participant_id)) return;
      // Durable first: once any node closes the sockets, no node may let the link back in.
      await removals.remove(conn.lessonId, msg.participant_id, conn.person.id, new Date(now));
      log.info({ lesson_id: conn.lessonId, person: msg.participant_id, by: conn.person.id }, 'participant removed');
      gateway.closePerson(conn.lessonId, msg.participant_id, 'forbidden');
    },
  });

  return {
    name: 'teacher',
    messages: [mute('teacher.mute'), mute('teacher.unmute'), remove],
    attach(gateway) {
      gw = gateway;
    },
    start: () => removals.start(closeRemoved),
    close: () => removals.stop(),
    async admit(link) {
      // a removal this node heard over the bus (the sockets' close) before Postgres's notification: checked exactly
      const rumoured = gw?.lesson(link.lesson_id)?.heardClose(personIdOf(link), 'forbidden') ?? false;
      return (await removals.isRemoved(link, rumoured)) ? removedRefusal : undefined;
    },
    // A removal heard on this node between the upgrade's check and now: the socket is in the
    // lesson from its open on, so a later one closes it directly; an earlier one is checked here,
    // before presence counts the person. No rumour (every arrival but a removed person's): no wait.
    beforePresence({ conn, gateway }) {
      if (!gateway.lesson(conn.lessonId)?.heardClose(conn.person.id, 'forbidden')) return;
      return removals.isRemoved(conn.link, true).then((removed) => {
        if (removed) conn.close('forbidden');
      });
    },
  };
}
