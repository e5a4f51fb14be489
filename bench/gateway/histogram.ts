/**
 * Latency histogram with 10 µs buckets up to 2 s (values above land in the
 * last bucket): exact enough for p50/p99 of millisecond latencies, fixed
 * memory however many samples, and mergeable across worker processes.
 */
export class Histogram {
  static readonly BUCKET_MS = 0.01;
  static readonly BUCKETS = 200_000;
  readonly counts: Uint32Array;
  count = 0;
  max = 0;

  constructor(counts?: number[]) {
    this.counts = new Uint32Array(Histogram.BUCKETS);
    if (counts) {
      for (let i = 0; i < counts.length; i += 2) this.counts[counts[i]] += counts[i + 1];
      this.count = this.counts.reduce((a, b) => a + b, 0);
    }
  }

  record(ms: number): void {
    const i = Math.min(Histogram.BUCKETS - 1, Math.max(0, Math.floor(ms / Histogram.BUCKET_MS)));
    this.counts[i]++;
    this.count++;
    if (ms > this.max) this.max = ms;
  }

  merge(other: Histogram): void {
    for (let i = 0; i < Histogram.BUCKETS; i++) this.counts[i] += other.counts[i];
    this.count += other.count;
    this.max = Math.max(this.max, other.max);
  }

  percentile(p: number): number {
    if (this.count === 0) return NaN;
    const target = Math.ceil((p / 100) * this.count);
    let seen = 0;
    for (let i = 0; i < Histogram.BUCKETS; i++) {
      seen += this.counts[i];
      if (seen >= target) return (i + 1) * Histogram.BUCKET_MS;
    }
    return this.max;
  }

  /** sparse [bucket, count, ...] for sending over IPC */
  toSparse(): number[] {
    const out: number[] = [];
    for (let i = 0; i < Histogram.BUCKETS; i++) if (this.counts[i]) out.push(i, this.counts[i]);
    return out;
  }
}
