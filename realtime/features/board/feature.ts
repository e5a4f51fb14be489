import { BoardOpError } from '../../../src/board/errors.js';
import { ClientMessages } from '../../protocol/clientMessages.js';
import type { GatewayFeature } from '../../features.js';
import type { ClientConnection } from '../../ClientConnection.js';
import { TokenBucket } from '../../lib/TokenBucket.js';
import { defineMessage } from '../../protocol/registry.js';
import type { LessonHub } from '../hub.js';
import { originOf } from './fanout.js';

/**
 * The shared board through the gateway (docs/board-protocol.md, "Board"):
 * `board.op` is validated, sequenced and stored by the BoardService (Postgres
 * decides the order, across nodes) and acknowledged once durable; committed
 * operations reach every page of the lesson on every node through the
 * lesson's BoardFanout; `board.sync` answers the board or what changed since
 * a seq. Who may do what (teacher-only page operations, pinned pages, limits)
 * is the BoardService's rule, applied with the role of the link.
 */
/**
 * Stroke deltas per connection: the page sends at most ~10 a second while a
 * pen moves; 20 a second with bursts of 40 leaves room for two pens in one
 * page, and a script cannot use the relay as a firehose. Over it, deltas are
 * dropped without an error: the stroke still arrives whole when committed.
 */
const STROKE_RATE = 20;
const STROKE_BURST = 40;

export function boardFeature(hub: LessonHub): GatewayFeature {
  const board = hub.board;
  const strokeBuckets = new WeakMap<ClientConnection, TokenBucket>();

  const stroke = defineMessage({
    type: 'board.stroke',
    schema: ClientMessages['board.stroke'],
    description: 'A stroke in progress: its new points, relayed as they come to the others in the lesson on every node, never stored (the board.op that ends the stroke stores it).',
    handle({ conn, gateway, now }, msg) {
      let bucket = strokeBuckets.get(conn);
      if (!bucket) strokeBuckets.set(conn, (bucket = new TokenBucket(STROKE_RATE, STROKE_BURST, now)));
      if (!bucket.take(now)) return;
      gateway.broadcast(conn.lessonId, JSON.stringify({ ...msg, by: conn.person.id }), { except: conn, ephemeral: true });
    },
  });

  const op = defineMessage({
    type: 'board.op',
    schema: ClientMessages['board.op'],
    description: 'A board operation; answered by board.ack (durable, at its place in the order) or board.reject.',
    async handle({ conn }, msg) {
      const fanout = hub.lesson(conn.lessonId)?.fanout;
      if (!fanout) return; // the connection is closing
      fanout.expect(conn, msg.ref);
      try {
        const ack = await board.submit(conn.lessonId, msg.op, { role: conn.person.role }, originOf(conn, msg.ref));
        fanout.committed(conn, msg.ref, ack.seq);
      } catch (err) {
        fanout.settled(conn, msg.ref);
        const e = err instanceof BoardOpError ? err : new BoardOpError('unavailable', 'the operation could not be stored; try again');
        if (!(err instanceof BoardOpError)) hub.log.error({ err, lesson_id: conn.lessonId }, 'board submit failed');
        conn.send(JSON.stringify({ type: 'board.reject', ref: msg.ref, code: e.code, message: e.message }));
      }
    },
  });

  const sync = defineMessage({
    type: 'board.sync',
    schema: ClientMessages['board.sync'],
    description: 'Asks for the board (since 0) or what changed after `since`; answered by board.state.',
    async handle({ conn }, msg) {
      let r;
      try {
        r = await board.read(conn.lessonId, msg.since);
      } catch (err) {
        // The page cannot go on without the board: it reconnects with backoff and asks again.
        hub.log.warn({ err: (err as Error).message, lesson_id: conn.lessonId }, 'board read failed');
        conn.close('unavailable');
        return;
      }
      conn.send(
        JSON.stringify({
          type: 'board.state',
          seq: r.head.seq,
          full: r.full,
          pages: r.head.pages,
          pinned_page_id: r.head.pinned_page_id,
          elements: r.elements,
          deleted_ids: r.deleted_ids,
        }),
      );
    },
  });

  return {
    name: 'board',
    messages: [op, sync, stroke],
    async welcome({ conn }) {
      try {
        await hub.enter(conn);
      } catch (err) {
        hub.log.warn({ err: (err as Error).message, lesson_id: conn.lessonId }, 'board feed unavailable at join');
        conn.close('unavailable');
      }
      return {};
    },
    onClosed({ conn }) {
      hub.exit(conn);
    },
    close: () => hub.close(),
  };
}
