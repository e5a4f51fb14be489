import v8 from 'node:v8';
import type { Config } from '../src/config.js';

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
 */
export function applyGatewayMemoryMode(config: Pick<Config, 'GATEWAY_OPTIMIZE_FOR_SIZE'>): boolean {
  if (!config.GATEWAY_OPTIMIZE_FOR_SIZE) return false;
  v8.setFlagsFromString('--optimize-for-size');
  return true;
}
