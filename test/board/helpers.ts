import { afterAll } from 'vitest';
import { BoardService, type BoardServiceOptions } from '../../src/board/service.js';
import type { BoardListener } from '../../src/board/feed.js';
import type { SequencedOp } from '../../src/board/schema.js';
import { createLesson, type Lesson } from '../../src/domain/lessons.js';
import type { Sql } from '../../src/db/index.js';
import type { Clock } from '../../src/lib/clock.js';
import { makeDeps } from '../helpers/deps.js';
import { partnerFactory } from '../helpers/factories.js';

/** A "gateway node" as far as the board goes: its own Postgres pool, Redis connections and BoardService. */
export function startNode(opts: Partial<BoardServiceOptions> = {}, clock?: Clock) {
  const deps = makeDeps({ clock });
  const board = new BoardService(deps, { previewDebounceMs: 60_000, ...opts });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await board.close();
    await deps.close();
  };
  afterAll(close);
  return { deps, board, close };
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
