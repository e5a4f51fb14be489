import type { Deps } from '../deps.js';

interface Readiness {
  ready: boolean;
  postgres: 'ok' | string;
  redis: 'ok' | string;
}

const within = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`no answer within ${ms} ms`)), ms).unref())]);

/** Shared by the API's and the gateway's /readyz. */
export async function checkReadiness(deps: Pick<Deps, 'sql' | 'redis'>, timeoutMs = 2000): Promise<Readiness> {
  const [pg, rd] = await Promise.allSettled([within(deps.sql`SELECT 1`, timeoutMs), within(deps.redis.ping(), timeoutMs)]);
  const reason = (r: PromiseSettledResult<unknown>) => (r.status === 'fulfilled' ? 'ok' : String((r.reason as Error)?.message ?? r.reason));
  const postgres = reason(pg);
  const redis = reason(rd);
  return { ready: postgres === 'ok' && redis === 'ok', postgres, redis };
}
