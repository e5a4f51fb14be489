import type { Next } from 'koa';
import type { AuthCache } from '../authCache.js';
import { Errors } from '../../errors.js';
import type { RateLimiter } from '../../lib/rateLimiter.js';
import type { ApiContext } from '../route.js';

/**
 * `Authorization: Bearer wbk_...`; anything else is 401 unauthorized.
 *
 * A key served from the cache costs nothing and is never limited here (its
 * own per-key limit follows). Every other request (a key lookup, a refusal)
 * takes one from its client address's allowance (`unauthenticated`, limited to
 * RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE); past it the answer is 429 with
 * Retry-After and no Postgres lookup, unless this process found the key
 * valid within the last minutes: a partner's key is not locked out by
 * others' bad keys sent from the same address (docs/api-decisions.md).
 */
export function auth(cache: AuthCache, unauthenticated: RateLimiter) {
  return async function authMiddleware(ctx: ApiContext, next: Next): Promise<void> {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'));
    const key = match?.[1];
    let result = key ? cache.cached(key) : undefined;
    if (!result) {
      const d = await unauthenticated.take(`addr:${ctx.ip}`);
      if (!d.allowed && !(key && cache.knownValid(key))) throw Errors.rateLimited(d.retryAfterMs);
      result = (key && (await cache.authenticate(key))) || undefined;
      if (!result) throw Errors.unauthorized();
    }
    ctx.state.auth = result;
    await next();
  };
}
