import { ClientMessages } from '../../protocol/clientMessages.js';
import type { Deps } from '../../../src/deps.js';
import type { ClientConnection } from '../../ClientConnection.js';
import { defineMessage, type GatewayFeature } from '../api.js';
import { KeyedQueue } from '../../lib/KeyedQueue.js';
import { errorFrame } from '../../protocol/errors.js';
import { callId } from './connections.js';
import { mediaStateFrame, type MediaStates } from './media.js';
import { LessonPeople } from './people.js';
import { lessonKey } from '../../lesson/Lesson.js';
import { iceServersFor } from './turn.js';

/** Who is in the lesson, as `rtc.*` asks it: kept on the Lesson, made at its first signal. */
const PEOPLE = lessonKey<LessonPeople>('call.people');

/** Person ids are 16 base64url characters (realtime/Gateway.ts publicPersonId). */
export const PERSON_ID = /^[A-Za-z0-9_-]{16}$/;

/** Refuses call messages in board_only lessons; true when the message may go on. */
export function callAllowed(conn: ClientConnection, type: string): boolean {
  if (conn.link.lesson_mode === 'full') return true;
  conn.send(errorFrame('board_only', 'this lesson has no video call', type));
  return false;
}

/**
 * The video call of `full` lessons (docs/protocol.md, "Video call"):
 * WebRTC signalling relayed to one person of the same lesson, on whichever
 * node their sockets are, with the sender's id set by the gateway; camera and
 * microphone state kept per lesson (MediaStates) and told to everyone. In
 * `board_only` lessons every call message is refused (`error` `board_only`)
 * and `welcome` carries no ICE servers.
 */
export function callFeature(deps: Deps, media: MediaStates): GatewayFeature {
  const log = deps.log.child({ component: 'call' });
  // the presence check is asynchronous: a socket's signals still leave in the order they came
  const inOrder = new KeyedQueue((err) => log.error({ err }, 'signal relay failed'));
  /**
   * Each full-lesson socket's TURN renewal: credentials live TURN_TTL_SECONDS, and fresh ones go to
   * the socket at half that while it is in the lesson. A person removed (their sockets closed, their
   * links refused) gets none: what they hold stops working within the TTL.
   */
  const renewals = new WeakMap<ClientConnection, NodeJS.Timeout>();
  const turnOn = !!deps.config.TURN_SECRET && deps.config.TURN_URLS.length > 0;
  const iceServers = (conn: ClientConnection) => iceServersFor(deps.config, conn.person.id, conn.link.expires_at, deps.clock.now());
  const renew = (conn: ClientConnection) => {
    const timer = setTimeout(() => {
      if (conn.state === 'closed') return;
      conn.send(JSON.stringify({ type: 'call.ice_servers', ice_servers: iceServers(conn) }));
      renew(conn);
    }, (deps.config.TURN_TTL_SECONDS * 1000) / 2);
    timer.unref();
    renewals.set(conn, timer);
  };

  const signal = <T extends 'rtc.offer' | 'rtc.answer' | 'rtc.ice' | 'rtc.hello'>(type: T) =>
    defineMessage({
      type,
      schema: ClientMessages[type],
      description:
        type === 'rtc.hello'
          ? 'A tab that joined the call asks each connection of the participant `to` to offer it a call (full lessons).'
          : `WebRTC ${type.slice(4)}, relayed only to the participant \`to\` of the same lesson, for its connection \`to_conn\` when given (full lessons).`,
      handle({ conn, gateway }, msg: { to: string; to_conn?: string; sdp?: string; candidate?: unknown }) {
        if (!callAllowed(conn, type)) return;
        if (!PERSON_ID.test(msg.to) || msg.to === conn.person.id) {
          conn.send(errorFrame('not_found', 'no such participant in this lesson', type));
          return;
        }
        const lesson = gateway.lesson(conn.lessonId);
        if (!lesson) return; // the connection is closing
        let people = lesson.get(PEOPLE);
        if (!people) lesson.set(PEOPLE, (people = new LessonPeople(lesson.id, gateway.presence, () => gateway.now())));
        const from = { from: conn.person.id, from_conn: callId(conn), ...(msg.to_conn ? { to_conn: msg.to_conn } : {}) };
        const frame = type === 'rtc.ice' ? { type, ...from, candidate: msg.candidate } : type === 'rtc.hello' ? { type, ...from } : { type, ...from, sdp: msg.sdp };
        return inOrder.run(conn.id, async () => {
          if (!(await people.has(msg.to))) conn.send(errorFrame('not_found', 'no such participant in this lesson', type));
          else gateway.toPerson(conn.lessonId, msg.to, JSON.stringify(frame));
        });
      },
    });

  const state = defineMessage({
    type: 'media.state',
    schema: ClientMessages['media.state'],
    description: 'My camera/microphone are on or off; told to everyone as media.state (a kind the teacher blocked stays off).',
    async handle({ conn, gateway }, msg) {
      if (!callAllowed(conn, 'media.state')) return;
      const s = await media.set(conn.lessonId, conn.person, msg);
      gateway.broadcast(conn.lessonId, mediaStateFrame(conn.person.id, s));
    },
  });

  return {
    name: 'call',
    messages: [signal('rtc.hello'), signal('rtc.offer'), signal('rtc.answer'), signal('rtc.ice'), state],
    async welcome({ conn }) {
      if (conn.link.lesson_mode !== 'full') return {};
      let states = {};
      try {
        states = await media.all(conn.lessonId);
      } catch (err) {
        log.warn({ err: (err as Error).message, lesson_id: conn.lessonId }, 'media state unavailable');
      }
      if (turnOn) renew(conn);
      return { ice_servers: iceServers(conn), media: states, call_id: callId(conn) };
    },
    async onClosed({ conn, gateway, personLeft }) {
      if (conn.link.lesson_mode !== 'full') return;
      clearTimeout(renewals.get(conn));
      // the tab's tiles go at once on every page, also while the person stays in another tab
      gateway.broadcast(conn.lessonId, JSON.stringify({ type: 'rtc.bye', from: conn.person.id, from_conn: callId(conn) }));
      if (!personLeft) return;
      const s = await media.left(conn.lessonId, conn.person.id);
      gateway.broadcast(conn.lessonId, mediaStateFrame(conn.person.id, s));
    },
  };
}
