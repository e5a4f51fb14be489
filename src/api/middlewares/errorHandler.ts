import type { Next } from 'koa';
import type { Logger } from '../../logger.js';
import { AppError, errorBody, INTERNAL_ERROR_BODY, withRequestId } from '../../errors.js';
import type { ApiContext } from '../route.js';
import { ClientClosedRequest } from './jsonBody.js';

/** nginx's "client closed request": no response reaches anyone; the access log says what happened. */
const CLIENT_CLOSED = 499;

/**
 * The one place where errors become responses:
 * AppError -> its status and `{"detail": {"code", "message"}, "request_id"}` (422: `{"detail": [issues], "request_id"}`);
 * a client that hung up mid-body -> 499 in the access log, one info line, no stack (it is not our fault);
 * anything else -> 500 `internal`, logged with the request id, never a stack trace in the body.
 */
export async function errorHandler(ctx: ApiContext, next: Next): Promise<void> {
  try {
    await next();
  } catch (err) {
    if (err instanceof AppError) {
      ctx.status = err.status;
      for (const [k, v] of Object.entries(err.headers ?? {})) ctx.set(k, v);
      ctx.body = withRequestId(errorBody(err), ctx.state.requestId);
      return;
    }
    const log = ctx.state.deps?.log;
    if (err instanceof ClientClosedRequest) {
      log?.info({ request_id: ctx.state.requestId, method: ctx.method, path: ctx.path }, 'client closed the request before its body arrived');
      ctx.status = CLIENT_CLOSED;
      return;
    }
    log?.error({ err, request_id: ctx.state.requestId, method: ctx.method, path: ctx.path }, 'unhandled error');
    ctx.status = 500;
    ctx.body = withRequestId(INTERNAL_ERROR_BODY, ctx.state.requestId);
  }
}

/** Errors of a socket whose client went away (Node's HTTP parser at an early end, resets, broken pipes). */
function clientWentAway(err: NodeJS.ErrnoException, ctx: ApiContext | undefined): boolean {
  if (ctx?.req.readableAborted) return true;
  const code = err.code ?? '';
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'ERR_STREAM_PREMATURE_CLOSE' || code.startsWith('HPE_');
}

/**
 * Koa's `error` event: errors after the response was decided (the socket
 * failed while it was written or read to its end). Without a listener Koa
 * prints them with their stack on stderr; a client that went away is routine
 * (debug), anything else is logged like an unhandled error.
 */
export function appErrorListener(log: Logger) {
  return (err: NodeJS.ErrnoException, ctx: ApiContext | undefined): void => {
    const at = { requestId: ctx?.state.requestId, method: ctx?.method, path: ctx?.path };
    if (clientWentAway(err, ctx)) log.debug({ ...at, code: err.code }, 'client went away');
    else log.error({ ...at, err }, 'response failed');
  };
}
