import type { BoardElement } from '../schema.js';
import { renderPagePng } from './png.js';

/**
 * The render child process (started by RenderPool, pool.ts): renders one page
 * at a time, as asked over the IPC channel. It parses the elements itself, so
 * a large page costs the parent no JSON parse either. It exits when the parent
 * goes away (the channel closes).
 */
export interface RenderRequest {
  id: number;
  /** the page's elements in stacking order, as a JSON array */
  elements: string;
  width: number;
}

export type RenderReply = { id: number; png: Uint8Array; approximate: boolean } | { id: number; error: string };

process.on('message', (req: RenderRequest) => {
  void (async () => {
    let reply: RenderReply;
    try {
      const out = await renderPagePng(JSON.parse(req.elements) as BoardElement[], req.width);
      reply = { id: req.id, png: out.png, approximate: out.approximate };
    } catch (err) {
      reply = { id: req.id, error: (err as Error).message };
    }
    process.send!(reply);
  })();
});
process.on('disconnect', () => process.exit(0));
