import type { BoardElement } from '../../../src/board/schema.js';

/**
 * Board operations must fit the gateway's frame limit (welcome.limits.max_payload_bytes,
 * 64 KB by default): a bigger frame closes the socket with 4413, and the page would send it
 * again after reconnecting, forever. Kept apart from sync.ts (no editor imports) so it is
 * tested on its own.
 */

/** bytes of a board.op frame around its elements: {"type":"board.op","ref":"…","op":{"type":"element.update","elements":[…]}} */
export const FRAME_OVERHEAD = 160;
const encoder = new TextEncoder();
export const byteLength = (s: string) => encoder.encode(s).length;

/** The element, thinned to fit `budget` bytes if it has points; null when it cannot fit. */
export function fitElement(el: BoardElement, budget: number): BoardElement | null {
  let cur = el;
  for (;;) {
    if (byteLength(JSON.stringify(cur)) <= budget) return cur;
    if (!('points' in cur) || cur.points.length <= 2) return null;
    const pts = cur.points as readonly unknown[];
    const thinned = pts.filter((_, i) => i % 2 === 0 || i === pts.length - 1);
    cur = { ...cur, points: thinned } as BoardElement;
  }
}
