import type { Redis } from '../redis.js';
import { withTimeout } from './timeout.js';

/**
 * Sliding-window log: at most `limit` requests of a key in ANY rolling
 * `periodMs` (the partner reads "600 requests per minute" that way). GCRA with a
 * burst of the whole limit let twice the limit through in one minute (the burst,
 * then the refill); a GCRA with burst + refill = limit would hold a steady client
 * to half the limit. The log is exact: each grant is an entry (stamp, count) in a
 * sorted set, and a request is allowed while the counts stamped in the last
 * period stay under the limit. Entries are weighted (one entry per reservation,
 * not per request), so a key costs at most one entry per grant, never one per
 * request of a large limit. One Lua script makes the check atomic across every
 * API process; Redis TIME is the clock (processes with skewed clocks agree),
 * unless a clock is injected (tests).
 *
 * KEYS: the log (sorted set, member `<seq>:<count>`, score = stamp in ms) and
 * its running total plus a member counter (hash `n`, `seq`).
 * ARGV: period, limit, want, hold (ms added to the stamp: a reservation may be
 * spent that much later, so its entry must not leave the window sooner), now (ms,
 * empty: Redis TIME).
 * Returns {granted, remaining, retryAfterMs, resetMs}.
 */
const WINDOW_LUA = `
local log, meta = KEYS[1], KEYS[2]
local period = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local hold = tonumber(ARGV[4])
local now = tonumber(ARGV[5])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function count(member) return tonumber(string.match(member, ':(%d+)$')) end
local total = tonumber(redis.call('HGET', meta, 'n') or '0')
local gone = redis.call('ZRANGEBYSCORE', log, '-inf', now - period)
if #gone > 0 then
  for _, m in ipairs(gone) do total = total - count(m) end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', now - period)
end
if total < 0 or redis.call('ZCARD', log) == 0 then total = 0 end
if total + 1 > limit then
  -- the instant enough of the oldest entries have left for one more request
  local entries = redis.call('ZRANGE', log, 0, -1, 'WITHSCORES')
  local need, freed, at = total + 1 - limit, 0, now + period
  for i = 1, #entries, 2 do
    freed = freed + count(entries[i])
    if freed >= need then at = tonumber(entries[i + 1]) + period break end
  end
  redis.call('HSET', meta, 'n', total)
  local newest = tonumber(entries[#entries])
  return {0, 0, math.max(1, at - now), math.max(0, newest + period - now)}
end
local grant = math.min(want, limit - total)
local stamp = now + hold
local seq = redis.call('HINCRBY', meta, 'seq', 1)
redis.call('ZADD', log, stamp, seq .. ':' .. grant)
total = total + grant
redis.call('HSET', meta, 'n', total)
local newest = tonumber(redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIRE', log, newest + period - now)
redis.call('PEXPIRE', meta, newest + period - now)
return {grant, limit - total, 0, newest + period - now}
`;

type WindowRedis = { slidingWindowTake(log: string, meta: string, periodMs: number, limit: number, want: number, holdMs: number, now: string): Promise<number[]> };

interface RateDecision {
  allowed: boolean;
  remaining: number;
  /** ms until the next request would be allowed (0 when allowed) */
  retryAfterMs: number;
  /** ms until the allowance is full again */
  resetMs: number;
}

/** How long a process keeps requests it reserved; unused ones are dropped (never handed back). */
const LEASE_TTL_MS = 1000;
/** A busy key reserves about this much of its own demand per Redis call. */
const LEASE_DEMAND_MS = 100;
/** At most this share of the allowance, and this many requests, per reservation. */
const LEASE_MAX_SHARE = 0.01;
const LEASE_MAX = 1000;
/** A single request granted for a caller waiting on the call; it is spent as the caller resumes. */
const SINGLE_GRANT_MS = 100;

interface KeyState {
  /** requests reserved from Redis and not used yet, valid until `expiresAt` */
  tokens: number;
  expiresAt: number;
  /** the allowance left in Redis after the reservation, and when it is full again */
  remaining: number;
  resetAt: number;
  /** Redis said no: nobody gets a request before this instant (only time frees the window; others only add) */
  deniedUntil: number;
  /** one Redis call per key at a time; the others wait for it */
  pending: Promise<boolean> | null;
  /** requests waiting for the Redis call in flight */
  waiting: number;
  /** requests seen since the last reservation (with `waiting`, the demand estimate) */
  arrivals: number;
  lastReserveAt: number;
}

export class RateLimiter {
  /** fallback logs while Redis is unreachable: [bucket end, count] oldest first */
  private readonly local = new Map<string, { entries: [number, number][]; total: number }>();
  private readonly keys = new Map<string, KeyState>();
  /** Redis calls made (a figure for tests and benchmarks) */
  redisCalls = 0;
  readonly periodMs: number;

  constructor(
    /** null: the window is kept in this process only (a single process, or tests without Redis) */
    private readonly redis: Redis | null,
    readonly limit: number,
    periodMs = 60_000,
    private readonly opts: { timeoutMs?: number; onRedisError?: (err: unknown) => void; now?: () => number } = {},
  ) {
    // Whole milliseconds: the script's PEXPIRE refuses a fraction, and a refused script fails open
    // (a budget of 10 per 10/3 s, the gateway's chat, was not enforced at all).
    this.periodMs = Math.ceil(periodMs);
    // ioredis runs it by EVALSHA and sends the source again after a Redis restart (NOSCRIPT)
    if (redis && typeof (redis as unknown as WindowRedis).slidingWindowTake !== 'function') {
      redis.defineCommand('slidingWindowTake', { numberOfKeys: 2, lua: WINDOW_LUA });
    }
  }

  /**
   * One request of `key`. A quiet key costs one Redis call per request, exactly
   * as the plain log. A busy key reserves a small batch (about 100 ms of its
   * own demand, at most 1 % of the allowance) in one call and spends it in
   * process, and a refusal is remembered until the instant the window frees,
   * so a flood costs Redis a few calls per second (docs/api-decisions.md).
   */
  async take(key: string): Promise<RateDecision> {
    if (!this.redis) return this.takeLocal(key);
    const st = this.state(key);
    st.arrivals++;
    for (;;) {
      const now = this.now();
      if (now < st.deniedUntil) {
        return { allowed: false, remaining: 0, retryAfterMs: st.deniedUntil - now, resetMs: Math.max(0, st.resetAt - now) };
      }
      if (st.tokens > 0 && now < st.expiresAt) {
        st.tokens--;
        return { allowed: true, remaining: st.remaining + st.tokens, retryAfterMs: 0, resetMs: Math.max(0, st.resetAt - now) };
      }
      st.pending ??= this.reserve(key, st).finally(() => (st.pending = null));
      st.waiting++;
      const ok = await st.pending;
      st.waiting--;
      if (!ok) return this.takeLocal(key);
    }
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  private state(key: string): KeyState {
    let st = this.keys.get(key);
    if (!st) {
      if (this.keys.size > 100_000) this.keys.clear();
      st = { tokens: 0, expiresAt: 0, remaining: 0, resetAt: 0, deniedUntil: 0, pending: null, waiting: 0, arrivals: 0, lastReserveAt: 0 };
      this.keys.set(key, st);
    }
    return st;
  }

  /** One Redis call: reserve requests for this process. False when Redis failed (fail open). */
  private async reserve(key: string, st: KeyState): Promise<boolean> {
    const now = this.now();
    const elapsed = now - st.lastReserveAt;
    const demand = elapsed < LEASE_TTL_MS ? Math.ceil((st.arrivals * LEASE_DEMAND_MS) / Math.max(1, elapsed)) : 1;
    const cap = Math.max(1, Math.min(LEASE_MAX, Math.floor(this.limit * LEASE_MAX_SHARE)));
    // everyone already waiting, or ~100 ms of the recent rate, whichever is more
    const want = Math.max(1, Math.min(cap, Math.max(st.waiting + 1, demand)));
    st.arrivals = 0;
    st.lastReserveAt = now;
    try {
      this.redisCalls++;
      const res = (await withTimeout(this.evalScript(key, want), this.opts.timeoutMs ?? 250)) as number[];
      const at = this.now();
      const [granted, remaining, retryAfterMs, resetMs] = res;
      st.remaining = remaining;
      st.resetAt = at + resetMs;
      if (granted > 0) {
        st.tokens = granted;
        // Counted from before the call (Redis stamped the batch later than that), so no request
        // of the batch is spent after its entry leaves the window. A single grant goes to the
        // caller that is waiting for it (a few ms at most under load).
        st.expiresAt = want > 1 ? now + LEASE_TTL_MS : at + SINGLE_GRANT_MS;
      } else {
        st.tokens = 0;
        st.deniedUntil = at + retryAfterMs;
      }
      return true;
    } catch (err) {
      this.opts.onRedisError?.(err);
      return false;
    }
  }

  private evalScript(key: string, want: number): Promise<number[]> {
    // A batch may be spent up to LEASE_TTL_MS after it was granted: its entry is stamped
    // that much later so it stays in the window as long as any request it pays for.
    // A single request is spent at once and stamped at the moment of the grant.
    const hold = want > 1 ? LEASE_TTL_MS : 0;
    const now = this.opts.now ? String(this.opts.now()) : '';
    // new key names: the GCRA keys (`rl:`) held a string, this is a sorted set and a hash
    return (this.redis as unknown as WindowRedis).slidingWindowTake(`rlw:{${key}}`, `rlw:{${key}}:m`, this.periodMs, this.limit, want, hold, now);
  }

  /**
   * Redis unreachable: fail open to the same sliding window kept in this
   * process, so each API process still enforces the limit on its own
   * (docs/api-decisions.md). Grants are counted in 100 ms buckets stamped at the
   * bucket's end: at most a bucket longer than exact, never shorter.
   */
  private takeLocal(key: string): RateDecision {
    const now = this.now();
    let log = this.local.get(key);
    if (!log) {
      if (this.local.size > 100_000) this.local.clear();
      log = { entries: [], total: 0 };
      this.local.set(key, log);
    }
    while (log.entries.length && log.entries[0][0] <= now - this.periodMs) log.total -= log.entries.shift()![1];
    const resetMs = () => (log.entries.length ? Math.max(0, log.entries[log.entries.length - 1][0] + this.periodMs - now) : 0);
    if (log.total + 1 > this.limit) {
      let freed = 0;
      let at = now + this.periodMs;
      for (const [stamp, n] of log.entries) {
        freed += n;
        if (freed >= log.total + 1 - this.limit) {
          at = stamp + this.periodMs;
          break;
        }
      }
      return { allowed: false, remaining: 0, retryAfterMs: Math.max(1, at - now), resetMs: resetMs() };
    }
    const stamp = Math.ceil((now + 1) / LOCAL_BUCKET_MS) * LOCAL_BUCKET_MS;
    const last = log.entries[log.entries.length - 1];
    if (last && last[0] === stamp) last[1]++;
    else log.entries.push([stamp, 1]);
    log.total++;
    return { allowed: true, remaining: this.limit - log.total, retryAfterMs: 0, resetMs: resetMs() };
  }
}

/** Bucket width of the in-process fallback log (bounds its size to period / bucket entries per key). */
const LOCAL_BUCKET_MS = 100;
