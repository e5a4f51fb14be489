import type { Deps } from '../deps.js';
import { withTimeout } from './timeout.js';

interface Readiness {
  ready: boolean;
  postgres: 'ok' | string;
  redis: 'ok' | string;
}


/** Shared by the API's and the gateway's /readyz. */
export async function checkReadiness(deps: Pick<Deps, 'sql' | 'redis'>, timeoutMs = 2000): Promise<Readiness> {
  const [pg, rd] = await Promise.allSettled([withTimeout(deps.sql`SELECT 1`, timeoutMs), withTimeout(deps.redis.ping(), timeoutMs)]);
  const reason = (r: PromiseSettledResult<unknown>) => (r.status === 'fulfilled' ? 'ok' : String((r.reason as Error)?.message ?? r.reason));
  const postgres = reason(pg);
  const redis = reason(rd);
  return { ready: postgres === 'ok' && redis === 'ok', postgres, redis };
}
