import v8 from 'node:v8';
import type { Config } from '../src/config.js';
import type { Logger } from '../src/logger.js';

/** How V8 was told to manage a gateway process's heap, as the fields of the `gateway listening` log line. */
export interface GatewayMemoryMode {
  optimize_for_size: boolean;
  /** joins per second from which size mode is suspended (GATEWAY_SIZE_MODE_BURST_JOINS); 0: never */
  size_mode_burst_joins?: number;
  /** --heap-growing-percent, when set (GATEWAY_HEAP_GROWING_PERCENT) */
  heap_growing_percent?: number;
}

/** GATEWAY_SIZE_MODE_BURST_JOINS when empty */
const SIZE_MODE_BURST_JOINS_DEFAULT = 100;
/** the join rate is sampled this often ... */
const BURST_SAMPLE_MS = 200;
/** ... and size mode comes back after this many samples in a row below the burst rate (2 s) */
export const BURST_QUIET_SAMPLES = 10;

/**
 * What a held connection costs in memory is mostly not its objects (about
 * 1.5 KB of live heap each) but the room V8 keeps after the joins' garbage:
 * with V8's defaults a node holding 10,000 idle connections kept 8-9 KB of RSS
 * per connection where the bare uWS relay keeps about 1 KB, and a full
 * collection gives nothing back (the heap stays committed). With
 * --optimize-for-size V8 grows the heap in smaller steps and gives pages back
 * sooner: about 1.3 KB per connection. GATEWAY_OPTIMIZE_FOR_SIZE=false leaves
 * V8's defaults.
 *
 * Size mode's price is paid while joins pour in: every full collection is a
 * memory-reducing one (compact, give pages back), one every ~0.7 s at 1,000
 * joins/s, each a pause of tens of milliseconds that sets the joins' p99. So
 * during a join burst (GATEWAY_SIZE_MODE_BURST_JOINS) size mode is suspended:
 * V8's own growth while the burst lasts, size mode again once it has been
 * quiet for 2 s. Size mode's next collections give the burst's room back as
 * the heap is used again (a full collection forced at that moment gives little
 * back: it does not compact as size mode's own do): a held
 * connection costs what it costs under size mode; the burst's peak is higher.
 *
 * GATEWAY_HEAP_GROWING_PERCENT (with size mode off) is a middle ground: V8's
 * own collector, with the old generation's limit grown by at most that percent
 * after each full collection; less idle CPU than size mode for more memory per
 * connection.
 *
 * V8's flags are the process's, so this is too: applied once per process, as
 * the gateway starts listening (it needs the gateway's count of arrivals).
 * The figures of each mode: docs/configuration.md, docs/benchmarks.md.
 */
export function applyGatewayMemoryMode(
  config: Pick<Config, 'GATEWAY_OPTIMIZE_FOR_SIZE' | 'GATEWAY_HEAP_GROWING_PERCENT' | 'GATEWAY_SIZE_MODE_BURST_JOINS'>,
  gateway: { readonly arrivals: number },
  log: Logger,
): GatewayMemoryMode {
  if (config.GATEWAY_OPTIMIZE_FOR_SIZE) {
    v8.setFlagsFromString('--optimize-for-size');
    const burst = config.GATEWAY_SIZE_MODE_BURST_JOINS ?? SIZE_MODE_BURST_JOINS_DEFAULT;
    if (burst > 0) {
      const bursts = new SizeModeBursts({
        joinsPerSecond: burst,
        arrivals: () => gateway.arrivals,
        setFlags: (flags) => v8.setFlagsFromString(flags),
        onChange: (suspended, rate) =>
          log.info({ joins_per_second: rate }, suspended ? 'size mode suspended: a join burst' : 'size mode resumed'),
      });
      setInterval(() => bursts.sample(), BURST_SAMPLE_MS).unref();
    }
    return { optimize_for_size: true, size_mode_burst_joins: burst };
  }
  const pct = config.GATEWAY_HEAP_GROWING_PERCENT;
  if (pct !== undefined) v8.setFlagsFromString(`--heap-growing-percent=${pct}`);
  return { optimize_for_size: false, heap_growing_percent: pct };
}

/**
 * Size mode off while joins arrive at `joinsPerSecond` or more, on again after
 * BURST_QUIET_SAMPLES samples below it; `sample()` is called every
 * BURST_SAMPLE_MS.
 */
export class SizeModeBursts {
  private last: number;
  private quiet = 0;
  private off = false;

  constructor(
    private readonly o: {
      joinsPerSecond: number;
      /** a count that grows by one per arrival */
      arrivals: () => number;
      setFlags: (flags: string) => void;
      onChange?: (suspended: boolean, joinsPerSecond: number) => void;
    },
  ) {
    this.last = o.arrivals();
  }

  /** size mode is off (a burst is on) */
  get suspended(): boolean {
    return this.off;
  }

  sample(): void {
    const n = this.o.arrivals();
    const rate = ((n - this.last) * 1000) / BURST_SAMPLE_MS;
    this.last = n;
    if (rate >= this.o.joinsPerSecond) {
      this.quiet = 0;
      if (!this.off) this.set(true, rate);
    } else if (this.off && ++this.quiet >= BURST_QUIET_SAMPLES) {
      this.set(false, rate);
    }
  }

  private set(suspended: boolean, rate: number): void {
    this.o.setFlags(suspended ? '--no-optimize-for-size' : '--optimize-for-size');
    this.off = suspended;
    this.quiet = 0;
    this.o.onChange?.(suspended, rate);
  }
}
