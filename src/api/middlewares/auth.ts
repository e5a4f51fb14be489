import type { Next } from 'koa';
import type { AuthCache } from '../authCache.js';
import { Errors } from '../../errors.js';
import type { ApiContext } from '../route.js';

/** `Authorization: Bearer wbk_...`; anything else is 401 unauthorized. */
export function auth(cache: AuthCache) {
  return async function authMiddleware(ctx: ApiContext, next: Next): Promise<void> {
    const header = ctx.get('authorization');
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw Errors.unauthorized();
    const result = await cache.authenticate(match[1]);
    if (!result) throw Errors.unauthorized();
    ctx.state.auth = result;
    await next();
  };
}
