import { z } from 'zod';
import { ERROR_CODES } from '../errors.js';
import { ErrorBodySchema, ValidationErrorBodySchema, type RouteDef } from './route.js';

export const API_PREFIX = '/api/partner/v1';

type Json = Record<string, unknown>;

/**
 * Builds the OpenAPI 3.1 document from the very route definitions the router
 * mounts and validates with (src/api/routes/index.ts): there is no second copy.
 */
export function buildOpenApi(routes: RouteDef[], version: string): Json {
  const components: Record<string, unknown> = {};

  const convert = (schema: z.ZodType, io: 'input' | 'output'): Json => {
    const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
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
          description: f.description,
          schema: convert(f, 'input'),
        });
      }
    }
    const responses: Record<string, unknown> = {};
    for (const [status, doc] of Object.entries(r.responses)) {
      responses[status] = {
        description: doc.description,
        ...(doc.headers
          ? { headers: Object.fromEntries(Object.entries(doc.headers).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }])) }
          : {}),
        ...(doc.schema || doc.contentType
          ? { content: { [doc.contentType ?? 'application/json']: doc.schema ? { schema: convert(doc.schema, 'output') } : {} } }
          : {}),
      };
    }
    const byStatus = new Map<number, string[]>();
    for (const code of [...r.errors, 'unauthorized', 'rate_limited'] as const) {
      const status = ERROR_CODES[code];
      byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
    }
    for (const [status, codes] of byStatus) {
      const schema = status === 422 ? ValidationErrorBodySchema : ErrorBodySchema;
      responses[String(status)] = {
        description: status === 422 ? 'Validation failed; detail lists the fields' : `Error codes: ${codes.join(', ')}`,
        content: { 'application/json': { schema: convert(schema, 'output') } },
      };
    }
    paths[r.path] ??= {};
    paths[r.path][r.method] = {
      tags: [r.tag],
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: convert(r.body, 'input') } } } } : {}),
      responses,
    };
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'Online lesson service: partner API',
      version,
      description: 'See docs/ in the repository for decisions on points the partner specification leaves open.',
    },
    servers: [{ url: API_PREFIX }],
    security: [{ bearer: [] }],
    paths,
    components: {
      schemas: components,
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'API key: wbk_...' } },
    },
  };
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
