/**
 * The one error type of the partner API. Domain code throws these; the API
 * maps them to `{"detail": {"code", "message"}}` in one place
 * (src/api/middlewares/errorHandler.ts). The gateway does not use them: it
 * refuses an upgrade with an HTTP status (realtime/admission/Admission.ts,
 * `refusals`), closes sockets with its own close codes (realtime/protocol/closeCodes.ts), and refuses board
 * operations with BoardOpError (src/board/errors.ts).
 */
/**
 * The `type` of a 422 item: the validator's issue codes (zod's) and the service's own two
 * (docs/api-decisions.md, "Errors"). The OpenAPI document lists them as an enum.
 */
export const VALIDATION_ISSUE_TYPES = [
  'invalid_type',
  'too_small',
  'too_big',
  'invalid_format',
  'invalid_value',
  'invalid_union',
  'invalid_key',
  'invalid_element',
  'not_multiple_of',
  'unrecognized_keys',
  'custom',
  'nul_character',
  'lone_surrogate',
] as const;
export type ValidationIssueType = (typeof VALIDATION_ISSUE_TYPES)[number];

/** One item of a 422's `detail`: where (field path), what (code) and a sentence (message). */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: ValidationIssueType;
}

export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** 422 only: the failing fields. */
    readonly issues?: ValidationIssue[],
    /** extra response headers, e.g. Retry-After */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

/** Every error code the API can answer, with its status (used for the OpenAPI document too). */
export const ERROR_CODES = {
  bad_request: 400,
  bad_url: 400,
  bad_range: 400,
  no_webhook: 400,
  unauthorized: 401,
  minutes_exhausted: 402,
  plan_board_only: 403,
  not_found: 404,
  no_preview: 404,
  board_empty: 404,
  method_not_allowed: 405,
  conflict: 409,
  idempotency_key_reused: 409,
  idempotency_key_in_use: 409,
  session_running: 409,
  archived: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_error: 422,
  export_too_large: 422,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_CODES;

/** The body of an unexpected failure (500): nothing of the failure itself reaches the client. */
export const INTERNAL_ERROR_BODY = { detail: { code: 'internal', message: 'Internal error' } } as const;

/** The response body of an error (the spec's form; 422 lists the fields), before its request id. */
export function errorBody(err: AppError): { detail: unknown } {
  return err.issues ? { detail: err.issues } : { detail: { code: err.code, message: err.message } };
}

/**
 * Every error body carries the id of the request it answers (the `X-Request-Id` header's value)
 * beside `detail`, so a partner can quote it from a logged body alone. A replayed stored error
 * gets the id of the request that replays it, like its header.
 */
export function withRequestId(body: { detail: unknown }, requestId: string): { detail: unknown; request_id: string } {
  return { ...body, request_id: requestId };
}

const make = (code: ErrorCode, message: string, headers?: Record<string, string>) =>
  new AppError(ERROR_CODES[code], code, message, undefined, headers);

export const Errors = {
  badRequest: (message = 'Malformed request') => make('bad_request', message),
  badUrl: (message = 'The webhook address is not acceptable') => make('bad_url', message),
  badRange: (message = 'The period is invalid') => make('bad_range', message),
  noWebhook: () => make('no_webhook', 'No webhook is configured'),
  unauthorized: () => make('unauthorized', 'Missing, invalid or revoked API key, or suspended partner'),
  minutesExhausted: () => make('minutes_exhausted', 'The balance has no minutes left; top up to issue new links'),
  planBoardOnly: () => make('plan_board_only', "The board-only plan cannot create lessons with mode 'full'"),
  notFound: (what = 'Lesson') => make('not_found', `${what} not found`),
  noPreview: () => make('no_preview', 'No thumbnail exists for this board yet'),
  boardEmpty: () => make('board_empty', 'The board has nothing on it to export'),
  exportTooLarge: (why: string) => make('export_too_large', `The board is too large to export as a PDF: ${why}`),
  methodNotAllowed: (allowed: string[]) => make('method_not_allowed', 'Method not allowed', { Allow: allowed.join(', ') }),
  conflict: (message = 'external_id is already used by another lesson') => make('conflict', message),
  archived: () => make('archived', 'The lesson was deleted'),
  sessionRunning: () => make('session_running', 'mode cannot change while a session runs'),
  idempotencyKeyReused: () =>
    make('idempotency_key_reused', 'This Idempotency-Key was used with another request (method, path or body) in the last 24 hours'),
  idempotencyKeyInUse: () => make('idempotency_key_in_use', 'A request with this Idempotency-Key is still running; retry later'),
  payloadTooLarge: (limit: number) => make('payload_too_large', `Request body is larger than ${limit} bytes`),
  unsupportedMediaType: () => make('unsupported_media_type', 'Request body must be application/json'),
  /** `retryAfterMs` from the limiter's decision; Retry-After is whole seconds, at least 1 */
  rateLimited: (retryAfterMs: number) =>
    make('rate_limited', 'Too many requests', { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) }),
  /** Every 503 says when to try again (Retry-After, whole seconds). */
  unavailable: (message: string, retryAfterSeconds: number) => make('unavailable', message, { 'Retry-After': String(retryAfterSeconds) }),
  /** A read that got no answer from the database: nothing changed, a retry is safe (docs/api-decisions.md). */
  databaseUnavailable: () => Errors.unavailable('The database did not answer; nothing was changed. Try again shortly', 1),
  validation: (issues: ValidationIssue[]) =>
    new AppError(422, 'validation_error', 'Request validation failed', issues),
};
