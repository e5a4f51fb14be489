import type { ApiContext } from '../route.js';
import { Errors, type ValidationIssue } from '../../errors.js';

/** Partner requests are small; a larger body is refused before it is buffered. */
export const MAX_BODY_BYTES = 64 * 1024;

/** The client closed the connection before its body arrived: nobody is left to answer (errorHandler logs a 499). */
export class ClientClosedRequest extends Error {
  constructor() {
    super('client closed the request');
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** A `\u` escape of a UTF-16 surrogate (D800-DFFF): the only way JSON text yields a lone surrogate. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Reads a JSON request body. Empty body -> undefined (the schema then says
 * what was missing). Wrong content type -> 415; bad JSON or bytes that are not
 * UTF-8 -> 400; a string or key with a lone surrogate -> 422 at its `loc`
 * (Postgres would store U+FFFD in its place: docs/api-decisions.md); too big -> 413.
 */
export async function readJsonBody(ctx: ApiContext): Promise<unknown> {
  const declared = Number(ctx.get('content-length') || '0');
  if (declared > MAX_BODY_BYTES) throw Errors.payloadTooLarge(MAX_BODY_BYTES);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of ctx.req) {
      size += (chunk as Buffer).length;
      // A body without Content-Length (chunked) that grows too big: stop reading. Leaving the loop
      // ends the stream, which then reads as aborted, so the 413 is thrown after the catch below.
      if (size > MAX_BODY_BYTES) break;
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    // Node ends the stream with "aborted" (ECONNRESET) when the client hangs up mid-body
    if (ctx.req.readableAborted || (err as NodeJS.ErrnoException).code === 'ECONNRESET') throw new ClientClosedRequest();
    throw err;
  }
  if (size > MAX_BODY_BYTES) throw Errors.payloadTooLarge(MAX_BODY_BYTES);
  if (size === 0) return undefined;
  if (!ctx.is('application/json', '+json')) throw Errors.unsupportedMediaType();
  let text: string;
  try {
    text = utf8.decode(Buffer.concat(chunks));
  } catch {
    throw Errors.badRequest('Request body is not valid UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw Errors.badRequest('Request body is not valid JSON');
  }
  if (SURROGATE_ESCAPE.test(text)) {
    const issues = surrogateIssues(value, ['body']);
    if (issues.length) throw Errors.validation(issues);
  }
  return value;
}

function surrogateIssues(value: unknown, loc: (string | number)[], out: ValidationIssue[] = []): ValidationIssue[] {
  const issue = (at: (string | number)[]) =>
    out.push({ loc: at, msg: 'must be valid Unicode: a lone UTF-16 surrogate (\\ud800-\\udfff) is not a character', type: 'lone_surrogate' });
  if (typeof value === 'string') {
    if (LONE_SURROGATE.test(value)) issue(loc);
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => surrogateIssues(v, [...loc, i], out));
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (LONE_SURROGATE.test(k)) issue([...loc, k]); // JSON.stringify writes it back as a \u escape
      surrogateIssues(v, [...loc, k], out);
    }
  }
  return out;
}
