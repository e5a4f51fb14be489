import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from '../errors.js';
import { ErrorBodySchema, ValidationErrorBodySchema, type RouteDef } from './route.js';
import { WEBHOOK_EVENTS } from './webhookEvents.js';

export const API_PREFIX = '/api/partner/v1';

type Json = Record<string, unknown>;

/** Answered by every partner route: before the route (auth, limit) or by the service itself. */
const EVERY_ROUTE: ErrorCode[] = ['unauthorized', 'rate_limited', 'internal', 'unavailable'];
/** Answered by a route that reads a JSON body, before the body is validated. */
const WITH_BODY: ErrorCode[] = ['bad_request', 'payload_too_large', 'unsupported_media_type', 'validation_error'];
/** Answered by every POST: the Idempotency-Key rules (src/api/idempotency/). */
const ON_POST: ErrorCode[] = ['bad_request', 'idempotency_key_reused', 'idempotency_key_in_use'];
/** Answered by a route that reads query parameters: they failed validation. */
const WITH_QUERY: ErrorCode[] = ['validation_error'];
/** A path parameter no resource can have is simply not found (src/api/middlewares/validate.ts). */
const WITH_PATH: ErrorCode[] = ['not_found'];

/** When each code is answered: the descriptions of the error responses (docs/api-decisions.md, "Errors"). */
const WHEN: Record<ErrorCode, string> = {
  bad_request: 'the body is not valid JSON, a malformed Idempotency-Key, an unknown `after` cursor',
  bad_url: 'the webhook address is refused (the reason is in `message`)',
  bad_range: 'the period is invalid: a malformed or impossible date, from after to, longer than a year, a day given twice',
  no_webhook: 'no webhook is set',
  unauthorized: 'no key, a malformed, unknown or revoked key, or a suspended partner',
  minutes_exhausted: 'a new link was requested while the balance is at or below zero; people holding links can still enter, and a top-up lifts it at once',
  plan_board_only: "mode 'full' on the board-only plan",
  not_found: "the lesson (or event, webhook) does not exist, belongs to another partner, or its id cannot exist (e.g. over 64 characters)",
  no_preview: 'nothing has been drawn on the board yet',
  board_empty: 'the board has nothing on it (never drawn on, or everything deleted): there is nothing to export',
  method_not_allowed: 'the path exists with other methods (`Allow` lists them)',
  conflict: '`external_id` is already used by another live lesson',
  idempotency_key_reused: 'the Idempotency-Key was used in the last 24 h with another request (method, path or body)',
  idempotency_key_in_use: 'a request with this Idempotency-Key is still running after 65 s',
  session_running: '`mode` was to change while a session of the lesson runs (it changes only between sessions)',
  archived: 'the lesson was deleted (archiving is final; its links stop opening)',
  payload_too_large: 'the body is over 64 KiB',
  unsupported_media_type: 'a body that is not application/json',
  validation_error: 'the request failed validation; `detail` lists the fields',
  export_too_large: 'the board is past what one PDF export takes (elements, image bytes or the PDF\'s size; `message` says which); it stays so until the board is smaller',
  rate_limited: 'more than the limit of requests in the last 60 s for this API key; Retry-After says when one more is allowed',
  internal: 'an unexpected fault (logged with the request id; no details in the body)',
  unavailable: 'a dependency is down where the request cannot be served safely: a read that got no answer from the database within 5 s (nothing was changed), the preview or export renderer busy or past its limits; Retry-After says when to try again',
};

const DESCRIPTION = `Partner API of the online lesson service. The partner specification is partner-api.md; where it
is silent, docs/api-decisions.md in the repository says what the service does. This document is generated
from the schemas the routes validate with, so it matches the running code; test/api/contract.test.ts checks
real responses and webhook deliveries against it.

- **Responses may gain fields within v1**: every response schema allows properties it does not list; clients
  must ignore what they do not know. New endpoints, optional request fields, event types and error codes may
  appear too; a breaking change ships as /api/partner/v2.
- **Errors**: \`{"detail": {"code", "message"}, "request_id"}\`; each response lists its codes as an enum;
  \`request_id\` is the \`X-Request-Id\` of the request. Every 422 is \`{"detail": [{loc, msg, type}],
  "request_id"}\` (the shared \`ValidationError\` schema), one item per failing field: \`loc\` the field's
  path, \`type\` a code from a fixed list, \`msg\` a sentence. A method the path does not have answers
  405 \`method_not_allowed\` with \`Allow\`; an unknown path 404 \`not_found\`.
- **Rate limit**: at most RATE_LIMIT_PER_MINUTE (600) requests per API key in any rolling 60 s (a sliding
  window); every authenticated response carries \`RateLimit\` and \`RateLimit-Policy\`, a 429 \`Retry-After\`.
- **Idempotency-Key** on every POST: the same key and request within 24 h replays the first response with
  \`Idempotent-Replayed: true\`; another request under the key is 409 \`idempotency_key_reused\`.
- **Lessons**: \`ended_at\` is the moment the lesson became empty (a session ends after 5 minutes without
  anyone; the wait is not lesson time). Archiving (DELETE) is final: every route naming the lesson then
  answers 410 \`archived\`; \`GET /lessons?external_id=\` still lists it with \`archived: true\`.
- **402 \`minutes_exhausted\`**: a new link while the balance is at or below zero; running lessons are never
  cut off (the balance may go negative).
- **Caching**: \`ETag\` on a lesson, its snapshot and preview; \`If-None-Match\` (lists, weak comparison, \`*\`)
  answers 304. JSON of 1 KiB or more is sent br- or gzip-compressed when accepted.
- **Webhooks** (below): signed \`X-Whiteboard-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>." + raw
  body)>\` (the scheme of Stripe's signatures); during a secret rotation two \`v1\` values.`;

const header = (description: string, schema: Json = { type: 'string' }, required = false): Json => ({ description, schema, ...(required ? { required } : {}) });

const HEADERS: Record<string, Json> = {
  'X-Request-Id': header("The request's id, new for each request (or the one the service's own proxy assigned); quote it when reporting a problem.", { type: 'string' }, true),
  RateLimit: header('IETF draft-ietf-httpapi-ratelimit-headers: `"default";r=<remaining>;t=<seconds until the allowance is full again>`'),
  'RateLimit-Policy': header('`"default";q=<limit>;w=60`: at most q requests in any rolling 60 s'),
  'Retry-After': header('seconds until one more request is allowed', { type: 'integer', minimum: 1 }, true),
  'Retry-After-Unavailable': header('seconds to wait before trying again (the database or the renderer is expected back)', { type: 'integer', minimum: 1 }, true),
  'Idempotent-Replayed': header('`true` when this is the stored response to an earlier request with the same Idempotency-Key'),
  Allow: header('the methods the path has'),
};
const ref = (kind: 'headers' | 'parameters' | 'schemas', name: string) => ({ $ref: `#/components/${kind}/${name}` });

const PARAMETERS: Record<string, Json> = {
  IdempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description: '1-255 visible ASCII characters. The same key and request (method, path, JSON body) within 24 h replays the first response; another request under it is 409.',
    schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
  },
  IfNoneMatch: {
    name: 'If-None-Match',
    in: 'header',
    required: false,
    description: 'RFC 9110: `*` or a list of entity tags, compared weakly; a match answers 304.',
    schema: { type: 'string' },
  },
};

/**
 * Builds the OpenAPI 3.1 document from the very route definitions the router
 * mounts and validates with (src/api/routes/index.ts): there is no second copy.
 */
export function buildOpenApi(routes: RouteDef[], version: string): Json {
  const components: Record<string, unknown> = {};

  const convert = (schema: z.ZodType, io: 'input' | 'output'): Json => {
    const raw = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
    // responses are open to new fields (docs/api-decisions.md, "Versioning"); zod closes output objects
    const json = (io === 'output' ? openObjects(raw) : raw) as Json;
    const defs = (json.$defs ?? {}) as Record<string, unknown>;
    delete json.$defs;
    delete json.$schema;
    for (const [k, v] of Object.entries(defs)) components[k] = rewriteRefs(v);
    const id = (schema.meta() as { id?: string } | undefined)?.id;
    if (id) {
      // zod puts a root schema that has an id into $defs and answers a $ref to it
      if (json.$ref !== `#/$defs/${id}`) components[id] = rewriteRefs(json);
      return { $ref: `#/components/schemas/${id}` };
    }
    return rewriteRefs(json) as Json;
  };
  const errorBody = convert(ErrorBodySchema, 'output');
  const validationBody = convert(ValidationErrorBodySchema, 'output');

  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const parameters: Json[] = [];
    for (const [where, schema] of [['path', r.params], ['query', r.query]] as const) {
      if (!schema) continue;
      for (const [name, field] of Object.entries(schema.shape)) {
        const f = field as z.ZodType;
        parameters.push({
          name,
          in: where,
          required: where === 'path' || !f.safeParse(undefined).success,
          description: f.description ?? (f as { def?: { out?: z.ZodType } }).def?.out?.description,
          schema: convert(f, 'input'),
        });
      }
    }
    if (r.method === 'post') parameters.push(ref('parameters', 'IdempotencyKey'));
    if (r.responses[304]) parameters.push(ref('parameters', 'IfNoneMatch'));

    const limited = { RateLimit: ref('headers', 'RateLimit'), 'RateLimit-Policy': ref('headers', 'RateLimit-Policy') };
    const responses: Record<string, Json> = {};
    for (const [status, doc] of Object.entries(r.responses)) {
      responses[status] = {
        description: doc.description,
        headers: {
          'X-Request-Id': ref('headers', 'X-Request-Id'),
          ...limited,
          ...(r.method === 'post' ? { 'Idempotent-Replayed': ref('headers', 'Idempotent-Replayed') } : {}),
          ...Object.fromEntries(Object.entries(doc.headers ?? {}).map(([h, d]) => [h, header(d)])),
        },
        ...(doc.schema || doc.contentType
          ? { content: { [doc.contentType ?? 'application/json']: doc.schema ? { schema: convert(doc.schema, 'output') } : {} } }
          : {}),
      };
    }
    const codes = new Set<ErrorCode>([
      ...r.errors,
      ...EVERY_ROUTE,
      ...(r.body ? WITH_BODY : []),
      ...(r.query ? WITH_QUERY : []),
      ...(r.method === 'post' ? ON_POST : []),
      ...(r.params ? WITH_PATH : []),
    ]);
    const byStatus = new Map<number, ErrorCode[]>();
    for (const code of codes) byStatus.set(ERROR_CODES[code], [...(byStatus.get(ERROR_CODES[code]) ?? []), code]);
    for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
      const headers: Json = { 'X-Request-Id': ref('headers', 'X-Request-Id') };
      // 401 is answered before the limiter runs; every later answer carries its headers
      if (status !== 401) Object.assign(headers, limited);
      if (status === 429) headers['Retry-After'] = ref('headers', 'Retry-After');
      if (status === 503) headers['Retry-After'] = ref('headers', 'Retry-After-Unavailable');
      if (r.method === 'post' && status !== 401 && status !== 429) headers['Idempotent-Replayed'] = ref('headers', 'Idempotent-Replayed');
      responses[String(status)] = {
        description: list.map((c) => `\`${c}\`: ${WHEN[c]}`).join('; '),
        headers,
        content: { 'application/json': { schema: status === 422 ? validationBody : withCodes(errorBody, list) } },
      };
    }
    paths[r.path] ??= {};
    paths[r.path][r.method] = {
      operationId: r.operationId,
      tags: [r.tag],
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: convert(r.body, 'input') } } } } : {}),
      responses,
    };
  }

  const webhooks: Record<string, unknown> = {};
  for (const [type, schema] of Object.entries(WEBHOOK_EVENTS)) {
    webhooks[type] = {
      post: {
        summary: `${type} event`,
        description: `${schema.description} Delivery rules: docs/webhooks.md (any 2xx within 10 s counts as delivered; else retried after 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h, 12 h).`,
        parameters: [
          { name: 'X-Whiteboard-Event', in: 'header', required: true, schema: { type: 'string', const: type } },
          { name: 'X-Whiteboard-Delivery', in: 'header', required: true, description: 'the event id', schema: { type: 'string', pattern: '^[0-9]+$' } },
          {
            name: 'X-Whiteboard-Signature',
            in: 'header',
            required: true,
            description: '`t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>`; two v1 values during a secret rotation; reject a t older than 5 minutes',
            schema: { type: 'string', pattern: '^t=[0-9]+(,v1=[0-9a-f]{64})+$' },
          },
          { name: 'User-Agent', in: 'header', required: true, schema: { type: 'string', const: 'Whiteboard-Webhooks/1.0' } },
        ],
        requestBody: { required: true, content: { 'application/json': { schema: convert(schema, 'output') } } },
        responses: {
          '2XX': { description: 'Delivered. Answer at once and process later.' },
          '400': { description: 'The receiver refused the event (e.g. a bad signature); retried on the schedule.' },
          default: { description: 'Any other answer, or none within 10 s: retried on the schedule.' },
        },
      },
    };
  }

  return {
    openapi: '3.1.0',
    info: { title: 'Online lesson service: partner API', version, description: DESCRIPTION },
    servers: [{ url: API_PREFIX }],
    security: [{ bearer: [] }],
    paths,
    webhooks,
    components: {
      schemas: { ...components, ErrorCode: { type: 'string', enum: Object.keys(ERROR_CODES), description: 'every error code the API answers' } },
      headers: HEADERS,
      parameters: PARAMETERS,
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'API key: wbk_...' } },
    },
  };
}

/** The error body with `code` narrowed to the codes this response can carry. */
function withCodes(errorRef: Json, codes: ErrorCode[]): Json {
  return {
    allOf: [errorRef, { type: 'object', properties: { detail: { type: 'object', properties: { code: { enum: codes } } } } }],
  };
}

function openObjects(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(openObjects);
  if (value && typeof value === 'object') {
    const out: Json = {};
    for (const [k, v] of Object.entries(value)) if (!(k === 'additionalProperties' && v === false)) out[k] = openObjects(v);
    return out;
  }
  return value;
}

function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (value && typeof value === 'object') {
    const out: Json = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = k === '$ref' && typeof v === 'string' ? v.replace(/^#\/\$defs\//, '#/components/schemas/') : rewriteRefs(v);
    }
    return out;
  }
  return value;
}
