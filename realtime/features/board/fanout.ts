import type { BoardListener } from './feed.js';
import type { SequencedOp, Tombstone } from '../../../src/board/schema.js';
import type { ClientConnection } from '../../ClientConnection.js';

/** `origin` of an operation submitted through this node: `<connection id>|<ref>` (connection ids contain no `|`). */
export const originOf = (conn: ClientConnection, ref: string): string => `${conn.id}|${ref}`;

/**
 * `skipped`: elements of the sender's operation that lost to a newer version (the sender drops them);
 * `restamped`: the teacher's writes stamped above the stored version (the sender takes these stamps; see docs/protocol.md)
 */
const ackFrame = (ref: string, seq: number | null, skipped?: string[], restamped?: Tombstone[]) =>
  JSON.stringify({ type: 'board.ack', ref, seq, ...(skipped?.length ? { skipped } : {}), ...(restamped?.length ? { restamped } : {}) });
/**
 * A page of a release before images (it did not ask for them: ClientConnection.showsImages) fails on
 * an image element: what the board sends it leaves them out, and it is told once, in the sentence
 * of a `board.reject` with an empty ref, which such a page shows (docs/board.md, "Images during a
 * rolling deploy"). The element stays on the board for everyone else and for that person's reload.
 */
export const NO_IMAGES_HERE = 'This board has images your page cannot show: reload the page to see them.';
const told = new WeakSet<ClientConnection>();
export function tellNoImages(conn: ClientConnection): void {
  if (told.has(conn)) return;
  told.add(conn);
  conn.send(JSON.stringify({ type: 'board.reject', ref: '', code: 'invalid', message: NO_IMAGES_HERE }));
}
const writesImages = (o: SequencedOp): boolean => (o.op.type === 'element.add' || o.op.type === 'element.update') && o.op.elements.some((e) => e.type === 'image');
/** the operation without its image elements (an operation of nothing else stays, empty: the page's seq goes on) */
const withoutImages = (o: SequencedOp): SequencedOp =>
  writesImages(o) && (o.op.type === 'element.add' || o.op.type === 'element.update') ? { ...o, op: { ...o.op, elements: o.op.elements.filter((e) => e.type !== 'image') } } : o;

const opsFrame = (ops: SequencedOp[]) => JSON.stringify({ type: 'board.ops', ops: ops.map((o) => ({ seq: o.seq, op: o.op })) });

/**
 * One lesson's board on one gateway node, delivered to its sockets: the
 * BoardService feed listener (one per lesson per node, not per socket).
 *
 * A batch of committed operations is serialised once as `board.ops` for
 * everyone; a connection whose own operations are in the batch gets instead
 * the same sequence with each of its operations replaced by `board.ack` at
 * its place, so it never sees a later seq before the ack of an earlier one.
 *
 * `unacked` keeps, per connection, the refs submitted and not yet
 * acknowledged, with their seq once the commit is known. If the feed loses
 * track (a Redis message lost: `reset`), the pages resync and the acks the
 * feed will never deliver are sent from here, so no operation stays in flight
 * on a page.
 */
export class BoardFanout implements BoardListener {
  private readonly unacked = new Map<ClientConnection, Map<string, number | null>>();
  /** the highest seq the feed delivered or skipped (reset) */
  private through = 0;

  constructor(private readonly present: () => ClientConnection[]) {}

  /** Before submitting: an ack is due to `conn` for `ref`. */
  expect(conn: ClientConnection, ref: string): void {
    let m = this.unacked.get(conn);
    if (!m) this.unacked.set(conn, (m = new Map()));
    m.set(ref, null);
  }

  /** The submit resolved: null seq (nothing left to apply) is acknowledged now; a seq is acknowledged by the feed in order. */
  committed(conn: ClientConnection, ref: string, seq: number | null): void {
    const m = this.unacked.get(conn);
    if (!m?.has(ref)) return; // the feed acknowledged it already
    if (seq === null || seq <= this.through) {
      // nothing applied, or the feed skipped past it in a reset: it will not acknowledge it
      m.delete(ref);
      conn.send(ackFrame(ref, seq));
    } else {
      m.set(ref, seq);
    }
  }

  /** The submit was refused or failed: no ack will come. */
  settled(conn: ClientConnection, ref: string): void {
    this.unacked.get(conn)?.delete(ref);
  }

  forget(conn: ClientConnection): void {
    this.unacked.delete(conn);
  }

  ops(batch: SequencedOp[]): void {
    this.through = Math.max(this.through, batch[batch.length - 1].seq);
    const senders = new Set<string>();
    for (const o of batch) if (o.origin) senders.add(o.origin.slice(0, o.origin.indexOf('|')));
    let common: string | undefined;
    // pages that show no images get the batch without them (worked out only when it has any)
    const images = batch.some(writesImages);
    let plain: SequencedOp[] | undefined;
    let plainFrame: string | undefined;
    for (const conn of this.present()) {
      const hide = images && !conn.showsImages;
      if (hide) tellNoImages(conn);
      const view = hide ? (plain ??= batch.map(withoutImages)) : batch;
      if (!senders.has(conn.id)) {
        conn.send(hide ? (plainFrame ??= opsFrame(view)) : (common ??= opsFrame(batch)));
        continue;
      }
      const mine = this.unacked.get(conn);
      let theirs: SequencedOp[] = [];
      for (const o of view) {
        const bar = o.origin ? o.origin.indexOf('|') : -1;
        if (bar < 0 || o.origin!.slice(0, bar) !== conn.id) {
          theirs.push(o);
          continue;
        }
        if (theirs.length) conn.send(opsFrame(theirs));
        theirs = [];
        const ref = o.origin!.slice(bar + 1);
        mine?.delete(ref);
        conn.send(ackFrame(ref, o.seq, o.skipped, o.restamped));
      }
      if (theirs.length) conn.send(opsFrame(theirs));
    }
  }

  reset(seq: number): void {
    this.through = Math.max(this.through, seq);
    const frame = JSON.stringify({ type: 'board.resync', seq });
    for (const conn of this.present()) {
      conn.send(frame);
      const mine = this.unacked.get(conn);
      if (!mine) continue;
      for (const [ref, s] of mine) {
        if (s !== null && s <= seq) {
          mine.delete(ref);
          conn.send(ackFrame(ref, s));
        }
      }
    }
  }
}
