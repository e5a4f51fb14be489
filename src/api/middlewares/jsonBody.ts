import type { ApiContext } from '../route.js';
import { Errors } from '../../errors.js';

/** Partner requests are small; a larger body is refused before it is buffered. */
export const MAX_BODY_BYTES = 64 * 1024;

/**
 * Reads a JSON request body. Empty body -> undefined (the schema then says
 * what was missing). Wrong content type -> 415; bad JSON -> 400; too big -> 413.
 */
export async function readJsonBody(ctx: ApiContext): Promise<unknown> {
  const declared = Number(ctx.get('content-length') || '0');
  if (declared > MAX_BODY_BYTES) throw Errors.payloadTooLarge(MAX_BODY_BYTES);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw Errors.payloadTooLarge(MAX_BODY_BYTES);
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return undefined;
  if (!ctx.is('application/json', '+json')) throw Errors.unsupportedMediaType();
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw Errors.badRequest('Request body is not valid JSON');
  }
}
