import type { Redis } from '../redis.js';

/**
 * GCRA (generic cell rate algorithm): `limit` requests per `periodMs`, refilled
 * continuously, bursting to at most `limit`. Unlike a fixed window it never lets
 * 2x the limit through around a window boundary. One Lua script makes the check
 * atomic across every API process; Redis TIME is the clock, so processes with
 * skewed clocks agree.
 */
const GCRA_LUA = `
local key = KEYS[1]
local period = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = period / limit
local tat = tonumber(redis.call('GET', key) or now)
if tat < now then tat = now end
local avail = math.floor((now + period - tat) / interval)
if avail < 1 then
  return {0, 0, math.ceil(tat + interval - period - now), math.ceil(tat - now)}
end
local grant = math.min(want, avail)
local new_tat = tat + grant * interval
redis.call('SET', key, tostring(new_tat), 'PX', math.max(1, math.ceil(new_tat - now)))
return {grant, math.floor((period - (new_tat - now)) / interval), 0, math.ceil(new_tat - now)}
`;

type GcraRedis = { gcraTake(key: string, periodMs: number, limit: number, want: number): Promise<number[]> };

export interface RateDecision {
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

interface KeyState {
  /** requests reserved from Redis and not used yet, valid until `expiresAt` */
  tokens: number;
  expiresAt: number;
  /** the allowance left in Redis after the reservation, and when it is full again */
  remaining: number;
  resetAt: number;
  /** Redis said no: nobody gets a request before this instant (GCRA cannot improve sooner) */
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
  private readonly local = new Map<string, number>();
  private readonly keys = new Map<string, KeyState>();
  /** Redis calls made (a figure for tests and benchmarks) */
  redisCalls = 0;

  constructor(
    private readonly redis: Redis,
    readonly limit: number,
    readonly periodMs = 60_000,
    private readonly opts: { timeoutMs?: number; onRedisError?: (err: unknown) => void; now?: () => number } = {},
  ) {
    // ioredis runs it by EVALSHA and sends the source again after a Redis restart (NOSCRIPT)
    if (typeof (redis as unknown as GcraRedis).gcraTake !== 'function') redis.defineCommand('gcraTake', { numberOfKeys: 1, lua: GCRA_LUA });
  }

  /**
   * One request of `key`. A quiet key costs one Redis call per request, exactly
   * as the plain GCRA. A busy key reserves a small batch (about 100 ms of its
   * own demand, at most 1 % of the allowance) in one call and spends it in
   * process, and a refusal is remembered until the instant GCRA allows again,
   * so a flood costs Redis a few calls per second (docs/api-decisions.md).
   */
  async take(key: string): Promise<RateDecision> {
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
      const res = (await withTimeout(this.evalScript(`rl:${key}`, want), this.opts.timeoutMs ?? 250)) as number[];
      const at = this.now();
      const [granted, remaining, retryAfterMs, resetMs] = res;
      st.remaining = remaining;
      st.resetAt = at + resetMs;
      if (granted > 0) {
        st.tokens = granted;
        st.expiresAt = at + LEASE_TTL_MS;
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
    return (this.redis as unknown as GcraRedis).gcraTake(key, this.periodMs, this.limit, want);
  }

  /**
   * Redis unreachable: fail open to the same GCRA kept in this process, so each
   * API process still enforces the limit on its own (docs/api-decisions.md).
   */
  private takeLocal(key: string): RateDecision {
    const now = this.now();
    const interval = this.periodMs / this.limit;
    const tat = Math.max(this.local.get(key) ?? now, now);
    const newTat = tat + interval;
    const allowAt = newTat - this.periodMs;
    if (now < allowAt) return { allowed: false, remaining: 0, retryAfterMs: Math.ceil(allowAt - now), resetMs: Math.ceil(tat - now) };
    this.local.set(key, newTat);
    if (this.local.size > 100_000) this.local.clear();
    return {
      allowed: true,
      remaining: Math.floor((this.periodMs - (newTat - now)) / interval),
      retryAfterMs: 0,
      resetMs: Math.ceil(newTat - now),
    };
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('redis timeout')), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
