/**
 * Typed client of the partner API: the types are generated from the service's
 * OpenAPI document (schema.ts, openapi-typescript), the calls made with
 * openapi-fetch, so every path, parameter, body and response is checked by the
 * compiler. Plus the webhook signature check and typed webhook events.
 *
 *   const api = createLessonClient({ baseUrl: 'https://…/api/partner/v1', apiKey: process.env.LESSONS_API_KEY! });
 *   const { data, error } = await api.POST('/lessons', { body: { title: 'Algebra' } });
 */
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './schema.js';
import { verifyWebhookSignature, type VerifyOptions, type VerifyFailure } from './verify.js';

export type { components, paths, webhooks } from './schema.js';
export * from './verify.js';

export type Schemas = components['schemas'];
export type Lesson = Schemas['Lesson'];
export type ParticipantLink = Schemas['ParticipantLink'];
/** Every error but 422: `{detail: {code, message}, request_id}`. */
export type ApiError = Schemas['Error'];
/** Every 422: `{detail: [{loc, msg, type}], request_id}`, one item per failing field. */
export type ValidationErrorBody = Schemas['ValidationError'];
export type ValidationIssue = Schemas['ValidationIssue'];

/**
 * Tells a 422 (a list of failing fields in `detail`) from every other error (`detail.code`), so
 * that after it `error.detail.code` type-checks; both carry `request_id`.
 */
export function isValidationError(error: ApiError | ValidationErrorBody): error is ValidationErrorBody {
  return Array.isArray(error.detail);
}
/** A delivered webhook event, by `type`. */
export type WebhookEvent =
  | Schemas['LessonStartedEvent']
  | Schemas['LessonEndedEvent']
  | Schemas['ParticipantJoinedEvent']
  | Schemas['BalanceLowEvent']
  | Schemas['BalanceExhaustedEvent']
  | Schemas['WebhookTestEvent'];

export type LessonClient = Client<paths>;

export interface ClientOptions {
  /** the base address, ending with /api/partner/v1 */
  baseUrl: string;
  /** `wbk_…`: on your server only, never in a browser or app */
  apiKey: string;
  /** another fetch (tests, proxies); default globalThis.fetch */
  fetch?: typeof fetch;
}

export function createLessonClient(opts: ClientOptions): LessonClient {
  return createClient<paths>({
    baseUrl: opts.baseUrl.replace(/\/+$/, ''),
    headers: { authorization: `Bearer ${opts.apiKey}` },
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
  });
}

export type ParsedWebhook = { ok: true; event: WebhookEvent } | { ok: false; reason: VerifyFailure | 'malformed_body' };

/**
 * Checks `X-Whiteboard-Signature` over the raw body (before any JSON parsing),
 * then parses it. Answer 400 when `ok` is false; otherwise answer 2xx at once,
 * drop duplicates by `event.id` and order by `event.created_at`.
 */
export function parseWebhook(rawBody: string | Buffer, signatureHeader: string | string[] | undefined | null, secret: string, opts: VerifyOptions = {}): ParsedWebhook {
  const checked = verifyWebhookSignature(rawBody, signatureHeader, secret, opts);
  if (!checked.ok) return checked;
  try {
    return { ok: true, event: JSON.parse(rawBody.toString()) as WebhookEvent };
  } catch {
    return { ok: false, reason: 'malformed_body' };
  }
}
