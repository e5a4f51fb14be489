import type { Next } from 'koa';
import { AppError } from '../../errors.js';
import type { ApiContext } from '../route.js';

/**
 * The one place where errors become responses:
 * AppError -> its status and `{"detail": {"code", "message"}}` (422: `{"detail": [issues]}`);
 * anything else -> 500 `internal`, logged with the request id, never a stack trace.
 */
export async function errorHandler(ctx: ApiContext, next: Next): Promise<void> {
  try {
    await next();
  } catch (err) {
    if (err instanceof AppError) {
      ctx.status = err.status;
      for (const [k, v] of Object.entries(err.headers ?? {})) ctx.set(k, v);
      ctx.body = err.issues ? { detail: err.issues } : { detail: { code: err.code, message: err.message } };
      return;
    }
    const log = ctx.state.deps?.log;
    log?.error({ err, requestId: ctx.state.requestId, method: ctx.method, path: ctx.path }, 'unhandled error');
    ctx.status = 500;
    ctx.body = { detail: { code: 'internal', message: 'Internal error' } };
  }
}
