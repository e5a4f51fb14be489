import v8 from 'node:v8';
import type { Config } from '../src/config.js';

/** How V8 was told to manage a gateway process's heap, as the fields of the `gateway listening` log line. */
export interface GatewayMemoryMode {
  optimize_for_size: boolean;
  /** --heap-growing-percent, when set (GATEWAY_HEAP_GROWING_PERCENT) */
  heap_growing_percent?: number;
}

/**
 * What a held connection costs in memory is mostly not its objects (about
 * 1.5 KB of live heap each) but the room V8 keeps after the joins' garbage:
 * with V8's defaults a node holding 10,000 idle connections kept 8-9 KB of RSS
 * per connection where the bare uWS relay keeps about 1 KB, and a full
 * collection gives nothing back (the heap stays committed). With
 * --optimize-for-size V8 grows the heap in smaller steps and gives pages back
 * sooner: about 1.3 KB per connection (docs/benchmarks.md, issue 16, with what
 * it costs in CPU and join latency). Applied at start, before the gateway
 * holds anything; GATEWAY_OPTIMIZE_FOR_SIZE=false leaves V8's defaults.
 *
 * GATEWAY_HEAP_GROWING_PERCENT (with size mode off) is the middle ground:
 * V8's own collector, with the old generation's limit grown by at most that
 * percent after each full collection; less idle CPU than size mode for more
 * memory per connection (the figures: docs/benchmarks.md, 2026-11-26 noon).
 * Set from inside the process at start it takes effect (measured: the same
 * figures as the node flag).
 */
export function applyGatewayMemoryMode(config: Pick<Config, 'GATEWAY_OPTIMIZE_FOR_SIZE' | 'GATEWAY_HEAP_GROWING_PERCENT'>): GatewayMemoryMode {
  if (config.GATEWAY_OPTIMIZE_FOR_SIZE) {
    v8.setFlagsFromString('--optimize-for-size');
    return { optimize_for_size: true };
  }
  const pct = config.GATEWAY_HEAP_GROWING_PERCENT;
  if (pct !== undefined) v8.setFlagsFromString(`--heap-growing-percent=${pct}`);
  return { optimize_for_size: false, heap_growing_percent: pct };
}
