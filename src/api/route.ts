import type { ParameterizedContext } from 'koa';
import { z } from 'zod';
import type { Deps } from '../deps.js';
import type { Authenticated } from '../domain/apiKeys.js';
import type { LessonLookup } from '../domain/lessons.js';
import { VALIDATION_ISSUE_TYPES, type ErrorCode } from '../errors.js';

export interface ApiState {
  deps: Deps;
  /** Set by the auth middleware on every partner route. */
  auth: Authenticated;
  requestId: string;
  /** The process's batched lesson lookup (batchedLessonLookup on the read pool): routes that name a lesson use it. */
  lessons: LessonLookup;
}
export type ApiContext = ParameterizedContext<ApiState>;

export interface ResponseDoc {
  description: string;
  schema?: z.ZodType;
  /** default application/json */
  contentType?: string;
  headers?: Record<string, string>;
}

type AnyObject = z.ZodObject<z.ZodRawShape>;
type Inferred<T> = T extends z.ZodType ? z.infer<T> : undefined;

/**
 * One partner route: its schemas (which validate the request AND produce the
 * OpenAPI document, src/api/openapi.ts), the error codes it can answer, and a
 * handler that calls one domain function and one presenter.
 */
export interface RouteDef<P = unknown, Q = unknown, B = unknown> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI style, relative to /api/partner/v1: `/lessons/{id}` */
  path: string;
  /** OpenAPI operationId: the method name generated clients give the operation (unique) */
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  params?: AnyObject;
  query?: AnyObject;
  body?: z.ZodType;
  responses: Record<number, ResponseDoc>;
  errors: ErrorCode[];
  /**
   * A GET whose own work may take longer than READ_WAIT_MS (the preview's render, bounded at 10 s by
   * its own limits): it is not cut at that wait for Postgres (src/db/errors.ts readOrUnavailable).
   */
  ownDeadline?: true;
  handler: (ctx: ApiContext, input: { params: P; query: Q; body: B }) => Promise<void> | void;
}

export function defineRoute<
  PS extends AnyObject | undefined = undefined,
  QS extends AnyObject | undefined = undefined,
  BS extends z.ZodType | undefined = undefined,
>(
  def: Omit<RouteDef, 'handler' | 'params' | 'query' | 'body'> & {
    params?: PS;
    query?: QS;
    body?: BS;
    handler: (
      ctx: ApiContext,
      input: { params: Inferred<PS>; query: Inferred<QS>; body: Inferred<BS> },
    ) => Promise<void> | void;
  },
): RouteDef {
  return def as unknown as RouteDef;
}

const RequestId = z
  .string()
  .describe("The id of the request this error answers: the same value as the X-Request-Id header. Quote it when reporting a problem.");

/** Error body of the spec, `{"detail": {"code", "message"}}`, plus the request id. */
export const ErrorBodySchema = z
  .object({ detail: z.object({ code: z.string(), message: z.string() }), request_id: RequestId })
  .meta({ id: 'Error' });

/** One failing field of a 422: the same shape for every validation error (docs/api-decisions.md). */
export const ValidationIssueSchema = z
  .object({
    loc: z
      .array(z.union([z.string(), z.number()]))
      .describe('Where the value was (`body`, `query` or `path`), then the path of the field in it, e.g. `["body", "user", "name"]`'),
    msg: z.string().describe('What is wrong, in English, for a person'),
    type: z.enum(VALIDATION_ISSUE_TYPES).describe('What is wrong, as a code a program can act on'),
  })
  .meta({ id: 'ValidationIssue' });

/** 422 body: `{"detail": [{loc, msg, type}], "request_id"}`, one item per failing field (docs/api-decisions.md). */
export const ValidationErrorBodySchema = z
  .object({ detail: z.array(ValidationIssueSchema).min(1), request_id: RequestId })
  .meta({ id: 'ValidationError' });

/**
 * Common path parameter. An id no lesson can have (over 64 characters, NUL) is
 * simply not found: 404 `not_found`, like an unknown id (src/api/middlewares/validate.ts).
 * The description names the resource in that 404's message.
 */
export const LessonIdParams = z.object({ id: z.string().min(1).max(64) }).describe('Lesson');
