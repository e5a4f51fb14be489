import { ClientMessages } from '../../protocol/clientMessages.js';
import type { Deps } from '../../../src/deps.js';
import type { LocalPerson } from '../../lesson/Lesson.js';
import { TokenBucket } from '../../lib/TokenBucket.js';
import { errorFrame } from '../../protocol/errors.js';
import { defineMessage, type GatewayFeature, type MessageContext } from '../api.js';

/**
 * A view a follower fits into their window: the page sends it at most 10 a second (a pan is a stream of
 * small moves, the last one is what matters); bursts of 20 leave room for a page switch in the middle.
 */
export const VIEW_RATE = 10;
const VIEW_BURST = 20;
/** "Everyone follow me" outlives the teacher's reload and reconnects, not the day. */
const LEAD_TTL_MS = 12 * 3600_000;
export const leadKey = (lessonId: string) => `lead:{${lessonId}}`;

/**
 * Following a view (docs/board.md, "Pointers, following and the laser"):
 *
 * - `view`: the part of the board the sender sees, relayed to everyone else in
 *   the lesson on every node as an ephemeral frame (never stored, may be
 *   dropped: the next one replaces it). Pages send it only while someone
 *   follows them.
 * - `follow`: whom the sender follows now, relayed the same way; every page
 *   knows who follows whom (the participants list shows it, the leader starts
 *   sending views). A page says it again when someone joins.
 * - `lead`: a teacher's "Everyone follow me". Kept in Redis (`lead:{<lesson>}`)
 *   for welcome, so a student who joins later follows too; a student's `lead`
 *   is refused with `error` `forbidden`, as a student's pin is.
 *
 * `view` and `follow` share one budget per person per node (VIEW_RATE); the excess is dropped silently.
 */
export function followFeature(deps: Deps): GatewayFeature {
  const log = deps.log.child({ component: 'follow' });
  const budgets = new WeakMap<LocalPerson, TokenBucket>();
  const withinBudget = ({ conn, gateway, now }: MessageContext): boolean => {
    const person = gateway.localPerson(conn.lessonId, conn.person.id);
    if (!person) return false; // the connection is closing
    let b = budgets.get(person);
    if (!b) budgets.set(person, (b = new TokenBucket(VIEW_RATE, VIEW_BURST, now)));
    return b.take(now);
  };

  const view = defineMessage({
    type: 'view',
    schema: ClientMessages.view,
    handle(ctx, msg) {
      if (!withinBudget(ctx)) return;
      const { conn, gateway } = ctx;
      const frame = JSON.stringify({ type: 'view', from: conn.person.id, page: msg.page, x1: msg.x1, y1: msg.y1, x2: msg.x2, y2: msg.y2 });
      gateway.broadcast(conn.lessonId, frame, { except: conn, exceptPerson: conn.person.id, ephemeral: true });
    },
  });

  const follow = defineMessage({
    type: 'follow',
    schema: ClientMessages.follow,
    handle(ctx, msg) {
      if (!withinBudget(ctx)) return;
      const { conn, gateway } = ctx;
      gateway.broadcast(conn.lessonId, JSON.stringify({ type: 'follow', from: conn.person.id, to: msg.to }), { except: conn, exceptPerson: conn.person.id, ephemeral: true });
    },
  });

  const lead = defineMessage({
    type: 'lead',
    schema: ClientMessages.lead,
    async handle({ conn, gateway }, msg) {
      if (conn.person.role !== 'teacher') {
        conn.send(errorFrame('forbidden', 'only a teacher can make everyone follow', 'lead'));
        return;
      }
      const key = leadKey(conn.lessonId);
      try {
        if (msg.on) await deps.redis.set(key, conn.person.id, 'PX', LEAD_TTL_MS);
        else await deps.redis.del(key);
      } catch (err) {
        // not kept: those present still follow (the frame below), a later joiner will not
        log.warn({ err: (err as Error).message, lesson_id: conn.lessonId }, 'lead not kept');
      }
      gateway.broadcast(conn.lessonId, JSON.stringify({ type: 'lead', by: msg.on ? conn.person.id : null }));
    },
  });

  return {
    name: 'follow',
    messages: [view, follow, lead],
    async welcome({ conn }) {
      try {
        return { lead: await deps.redis.get(leadKey(conn.lessonId)) };
      } catch (err) {
        log.warn({ err: (err as Error).message, lesson_id: conn.lessonId }, 'lead unavailable');
        return { lead: null };
      }
    },
  };
}
