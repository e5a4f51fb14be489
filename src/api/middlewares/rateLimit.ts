import type { Next } from 'koa';
import { Errors } from '../../errors.js';
import type { RateLimiter } from '../../lib/rateLimiter.js';
import type { ApiContext } from '../route.js';

/**
 * Per API key (by key id, never the key itself). IETF RateLimit headers
 * (draft-ietf-httpapi-ratelimit-headers) go on every authenticated response.
 */
export function rateLimit(limiter: RateLimiter) {
  const policy = `"default";q=${limiter.limit};w=${Math.round(limiter.periodMs / 1000)}`;
  return async function rateLimitMiddleware(ctx: ApiContext, next: Next): Promise<void> {
    const d = await limiter.take(ctx.state.auth.keyId);
    ctx.set('RateLimit-Policy', policy);
    ctx.set('RateLimit', `"default";r=${d.remaining};t=${Math.ceil(d.resetMs / 1000)}`);
    if (!d.allowed) throw Errors.rateLimited(d.retryAfterMs);
    await next();
  };
}
