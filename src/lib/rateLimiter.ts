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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = period / limit
local tat = tonumber(redis.call('GET', key) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local allow_at = new_tat - period
if now < allow_at then
  return {0, 0, math.ceil(allow_at - now), math.ceil(tat - now)}
end
redis.call('SET', key, tostring(new_tat), 'PX', math.max(1, math.ceil(new_tat - now)))
return {1, math.floor((period - (new_tat - now)) / interval), 0, math.ceil(new_tat - now)}
`;

export interface RateDecision {
  allowed: boolean;
  remaining: number;
  /** ms until the next request would be allowed (0 when allowed) */
  retryAfterMs: number;
  /** ms until the allowance is full again */
  resetMs: number;
}

export class RateLimiter {
  private readonly local = new Map<string, number>();
  private sha: string | undefined;

  constructor(
    private readonly redis: Redis,
    readonly limit: number,
    readonly periodMs = 60_000,
    private readonly opts: { timeoutMs?: number; onRedisError?: (err: unknown) => void; now?: () => number } = {},
  ) {}

  async take(key: string): Promise<RateDecision> {
    try {
      const res = (await withTimeout(this.evalScript(`rl:${key}`), this.opts.timeoutMs ?? 250)) as number[];
      return { allowed: res[0] === 1, remaining: res[1], retryAfterMs: res[2], resetMs: res[3] };
    } catch (err) {
      this.opts.onRedisError?.(err);
      return this.takeLocal(key);
    }
  }

  private async evalScript(key: string): Promise<unknown> {
    if (this.sha) {
      try {
        return await this.redis.evalsha(this.sha, 1, key, this.periodMs, this.limit);
      } catch (err) {
        if (!String((err as Error).message).includes('NOSCRIPT')) throw err;
      }
    }
    this.sha = (await this.redis.script('LOAD', GCRA_LUA)) as string;
    return this.redis.evalsha(this.sha, 1, key, this.periodMs, this.limit);
  }

  /**
   * Redis unreachable: fail open to the same GCRA kept in this process, so each
   * API process still enforces the limit on its own (docs/api-decisions.md).
   */
  private takeLocal(key: string): RateDecision {
    const now = this.opts.now?.() ?? Date.now();
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
