import { afterAll } from 'vitest';
import { LessonBus } from '../../realtime/bus/LessonBus.js';
import { BoardService, type BoardServiceOptions } from '../../realtime/features/board/service.js';
import type { BoardListener } from '../../realtime/features/board/feed.js';
import type { SequencedOp } from '../../src/board/schema.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { createLesson, type Lesson } from '../../src/domain/lessons.js';
import type { Sql } from '../../src/db/index.js';
import type { Clock } from '../../src/lib/clock.js';
import { makeDeps } from '../helpers/deps.js';
import { partnerFactory } from '../helpers/factories.js';

/**
 * A "gateway node" as far as the board goes: its own Postgres pool, Redis
 * connections, BoardService and lesson bus (the gateway's: committed
 * operations travel as `board` envelopes, realtime/features/board/feature.ts).
 * `join` listens to the lesson's channel first, as the gateway's Lesson does.
 */
export function startNode(opts: Partial<BoardServiceOptions> = {}, clock?: Clock) {
  const deps = makeDeps({ clock });
  const board = new BoardService(deps, { previewDebounceMs: 60_000, ...opts });
  const bus = new LessonBus(deps.redis, deps.config.REDIS_KEY_PREFIX, randomBase62(8), deps.log);
  bus.receiver = (lessonId, e) => {
    if (e.kind === 'board') board.received(lessonId, JSON.parse(e.payload) as SequencedOp[]);
  };
  board.relay = { publish: (lessonId, ops) => void bus.publish(lessonId, { kind: 'board', payload: JSON.stringify(ops) }) };
  const join = async (lessonId: string, listener: BoardListener) => {
    await bus.subscribe(lessonId);
    return board.join(lessonId, listener);
  };
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await board.close();
    await bus.close();
    await deps.close();
  };
  afterAll(close);
  return { deps, board, join, close };
}

export async function newLesson(sql: Sql, subject: Lesson['subject_mode'] = 'generic'): Promise<Lesson> {
  const { partner } = await partnerFactory(sql);
  return createLesson(sql, partner, { title: 'Board test', subject_mode: subject }, new Date());
}

/** A listener that records what a node relays to its local sockets. */
export function recorder() {
  const seqs: number[] = [];
  const ops: SequencedOp[] = [];
  const resets: number[] = [];
  const listener: BoardListener = {
    ops: (batch) => {
      for (const o of batch) {
        seqs.push(o.seq);
        ops.push(o);
      }
    },
    reset: (seq) => resets.push(seq),
  };
  return { listener, seqs, ops, resets };
}

export async function until(cond: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A read pool whose every statement first runs `before`: to count them, hold them (await a gate)
 * or fail one (throw). The statement then goes to Postgres as usual.
 */
export function throughReads<T extends object>(sql: T, before: () => void | Promise<void>): T {
  return new Proxy(sql, {
    apply: async (target, self, args) => {
      await before();
      return Reflect.apply(target as unknown as (...a: unknown[]) => unknown, self, args);
    },
  });
}
