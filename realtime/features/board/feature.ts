import { BoardOpError } from '../../../src/board/errors.js';
import { ClientMessages } from '../../protocol/clientMessages.js';
import { ELEMENT_TYPES, NODE_TYPES_BEFORE_LIST, OPTIONAL_ELEMENT_FIELDS, type SequencedOp } from '../../../src/board/schema.js';
import type { Deps } from '../../../src/deps.js';
import { defineMessage, type GatewayFeature } from '../api.js';
import type { ClientConnection } from '../../ClientConnection.js';
import { lessonKey } from '../../lesson/Lesson.js';
import { TokenBucket } from '../../lib/TokenBucket.js';
import { BoardFanout, originOf, tellNoImages } from './fanout.js';
import type { LessonFeed } from './feed.js';
import type { BoardService } from './service.js';

/** The board of one lesson on this node, kept on the Lesson: its feed and the feed's one listener. */
interface LessonBoard {
  /**
   * what this node commits and hears of the lesson, in order; `started()`: it knows where the
   * board stands (BoardService.openFeed), which a client's board.sync and board.op wait for
   */
  feed: LessonFeed;
  fanout: BoardFanout;
}
const BOARD = lessonKey<LessonBoard>('board');

/**
 * The shared board through the gateway (docs/protocol.md, "Board"):
 * `board.op` is validated, sequenced and stored by the BoardService (Postgres
 * decides the order, across nodes) and acknowledged once durable; committed
 * operations reach every page of the lesson on every node through the
 * lesson's BoardFanout; `board.sync` answers the board or what changed since
 * a seq. Who may do what (teacher-only page operations, pinned pages, limits)
 * is the BoardService's rule, applied with the role of the link.
 *
 * Per lesson and node: when the lesson opens here (its bus channel is
 * subscribed), its feed starts with one BoardFanout for its sockets (a page's
 * first board.sync or board.op waits until the feed knows the board's seq; the
 * welcome does not); it stops when the lesson closes. Committed operations travel to the other nodes as
 * `board` envelopes on the lesson's channel.
 */
/**
 * Stroke deltas per connection: the page sends at most ~10 a second while a
 * pen moves; 20 a second with bursts of 40 leaves room for two pens in one
 * page, and a script cannot use the relay as a firehose. Over it, deltas are
 * dropped without an error: the stroke still arrives whole when committed.
 */
const STROKE_RATE = 20;
const STROKE_BURST = 40;

export function boardFeature(deps: Deps, board: BoardService): GatewayFeature {
  const log = deps.log.child({ component: 'board' });
  // images switched off (FILE_IMAGES): the node lists the types of a node from before images
  const elementTypes = deps.config.FILE_IMAGES ? ELEMENT_TYPES : NODE_TYPES_BEFORE_LIST;
  const strokeBuckets = new WeakMap<ClientConnection, TokenBucket>();
  /**
   * Each connection's stroke in progress: its id and whether its start passed the rules (a promise
   * while the check runs; the deltas that arrive meanwhile wait for it, in order).
   */
  const strokes = new WeakMap<ClientConnection, { id: string; admitted: Promise<boolean> }>();

  const stroke = defineMessage({
    type: 'board.stroke',
    schema: ClientMessages['board.stroke'],
    description:
      'A stroke in progress: its new points, relayed as they come to the others in the lesson on every node, never stored (the board.op that ends the stroke stores it). Its start (`from` 0, with `head`) is checked once by the rules of that board.op (lock, pin, page, element id, role); a stroke that would be refused is not relayed.',
    handle({ conn, gateway, now }, msg) {
      let bucket = strokeBuckets.get(conn);
      if (!bucket) strokeBuckets.set(conn, (bucket = new TokenBucket(STROKE_RATE, STROKE_BURST, now)));
      if (!bucket.take(now)) return;
      let current = strokes.get(conn);
      if (msg.from === 0) {
        const head = msg.head;
        const check = async (): Promise<boolean> => {
          if (!head || head.id !== msg.id) return false;
          try {
            await board.admitStroke(conn.lessonId, head, { role: conn.person.role });
            return true;
          } catch (err) {
            if (!(err instanceof BoardOpError)) log.warn({ err: (err as Error).message, lesson_id: conn.lessonId }, 'stroke check failed');
            return false;
          }
        };
        // after the previous stroke's check: a connection's strokes are relayed in the order drawn
        const admitted = current ? current.admitted.then(check) : check();
        strokes.set(conn, (current = { id: msg.id, admitted }));
      }
      // a delta of a stroke whose start was not seen (or not admitted) is not relayed: its commit is checked anyway
      if (!current || current.id !== msg.id) return;
      const frame = JSON.stringify({ ...msg, by: conn.person.id });
      void current.admitted.then((ok) => {
        if (ok && conn.state !== 'closed') gateway.broadcast(conn.lessonId, frame, { except: conn, ephemeral: true });
      });
    },
  });

  const op = defineMessage({
    type: 'board.op',
    schema: ClientMessages['board.op'],
    description: 'A board operation; answered by board.ack (durable, at its place in the order) or board.reject.',
    async handle({ conn, gateway }, msg) {
      const lb = gateway.lesson(conn.lessonId)?.get(BOARD);
      if (!lb) return; // the connection is closing
      const { fanout } = lb;
      fanout.expect(conn, msg.ref);
      try {
        // committed after the feed's starting seq, so the feed acknowledges it in order
        await lb.feed.started();
        const ack = await board.submit(conn.lessonId, msg.op, { role: conn.person.role, person_id: conn.person.id }, originOf(conn, msg.ref));
        fanout.committed(conn, msg.ref, ack.seq);
      } catch (err) {
        fanout.settled(conn, msg.ref);
        const e = err instanceof BoardOpError ? err : new BoardOpError('unavailable', 'the operation could not be stored; try again');
        if (!(err instanceof BoardOpError)) log.error({ err, lesson_id: conn.lessonId }, 'board submit failed');
        conn.send(JSON.stringify({ type: 'board.reject', ref: msg.ref, code: e.code, message: e.message }));
      }
    },
  });

  const sync = defineMessage({
    type: 'board.sync',
    schema: ClientMessages['board.sync'],
    description: 'Asks for the board (since 0) or what changed after `since`; answered by board.state.',
    async handle({ conn, gateway }, msg) {
      let r;
      try {
        // read at or after the seq the lesson's feed started from: every later operation reaches this page
        await gateway.lesson(conn.lessonId)?.get(BOARD)?.feed.started();
        r = await board.read(conn.lessonId, msg.since);
      } catch (err) {
        // The page cannot go on without the board: it reconnects with backoff and asks again.
        log.warn({ err: (err as Error).message, lesson_id: conn.lessonId }, 'board read failed');
        conn.close('unavailable');
        return;
      }
      // a page of a release before images is sent the board without them (fanout.ts, tellNoImages)
      let elements = r.elements;
      if (!conn.showsImages && elements.some((e) => e.type === 'image')) {
        elements = elements.filter((e) => e.type !== 'image');
        tellNoImages(conn);
      }
      conn.send(
        JSON.stringify({
          type: 'board.state',
          seq: r.head.seq,
          full: r.full,
          pages: r.head.pages,
          pinned_page_id: r.head.pinned_page_id,
          elements,
          deleted_ids: r.deleted_ids,
          optional_fields: OPTIONAL_ELEMENT_FIELDS,
          element_types: elementTypes,
        }),
      );
    },
  });

  return {
    name: 'board',
    messages: [op, sync, stroke],
    attach(gateway) {
      board.relay = { publish: (lessonId, ops) => gateway.publish(lessonId, 'board', JSON.stringify(ops)) };
      board.lessonFeed = (lessonId) => gateway.lesson(lessonId)?.get(BOARD)?.feed;
      board.onCommitFailed = (cause) => gateway.metrics.boardCommitFailed(cause);
    },
    onLessonOpen(lesson) {
      // not awaiting the feed's start: a first arrival's welcome does not wait for the board (see openFeed)
      const fanout = new BoardFanout(() => lesson.present());
      const feed = board.openFeed(lesson.id);
      feed.listeners.add(fanout);
      lesson.set(BOARD, { feed, fanout });
    },
    onLessonClose(lesson) {
      lesson.get(BOARD)?.feed.close();
      board.lessonLeft(lesson.id);
    },
    onBus: {
      board(lesson, e) {
        let ops: SequencedOp[];
        try {
          ops = JSON.parse(e.payload) as SequencedOp[];
        } catch {
          log.warn({ lesson_id: lesson.id }, 'unreadable board envelope');
          return;
        }
        lesson.get(BOARD)?.feed.push(ops);
      },
    },
    onClosed({ conn, gateway }) {
      gateway.lesson(conn.lessonId)?.get(BOARD)?.fanout.forget(conn);
    },
    close: () => board.close(),
  };
}
