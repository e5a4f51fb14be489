import { describe, expect, it } from 'vitest';
import { partnerRoutes } from '../../src/api/routes/index.js';
import { startTestApi } from '../helpers/api.js';

const api = await startTestApi();

describe('GET /api/partner/v1/openapi.json', () => {
  it('is an OpenAPI 3.1 document covering every mounted route, with bodies, responses and errors', async () => {
    const res = await api.request('GET', '/api/partner/v1/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toBe('3.1.0');
    for (const r of partnerRoutes) {
      const op = doc.paths[r.path]?.[r.method];
      expect(op, `${r.method} ${r.path}`).toBeDefined();
      for (const status of Object.keys(r.responses)) expect(op.responses[status], `${r.method} ${r.path} ${status}`).toBeDefined();
      expect(op.responses['401']).toBeDefined();
      expect(op.responses['429']).toBeDefined();
      if (r.body) expect(op.requestBody.content['application/json'].schema).toBeDefined();
    }
    const create = doc.paths['/lessons'].post;
    expect(create.responses['409'].description).toContain('conflict');
    expect(create.responses['403'].description).toContain('plan_board_only');
    expect(create.responses['422'].content['application/json'].schema.$ref).toBe('#/components/schemas/ValidationError');
    const lessonCreate = doc.components.schemas.LessonCreate;
    expect(lessonCreate.properties.title).toMatchObject({ type: 'string', minLength: 1, maxLength: 255 });
    expect(lessonCreate.required).toEqual(['title']);
    expect(doc.components.schemas.LinkCreate.properties.ttl_minutes).toMatchObject({ minimum: 15, maximum: 720, default: 180 });
    expect(doc.paths['/lessons/{id}'].get.parameters[0]).toMatchObject({ name: 'id', in: 'path', required: true });
  });

  it('gives every operation a unique operationId, a name a generated client can use as a method', async () => {
    const doc = (await api.request('GET', '/api/partner/v1/openapi.json')).body;
    const ids: string[] = [];
    for (const [path, item] of Object.entries<Record<string, { operationId?: string }>>(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        expect(op.operationId, `${method} ${path}`).toMatch(/^[a-z][A-Za-z0-9]*$/);
        ids.push(op.operationId!);
      }
    }
    expect(ids.length).toBe(partnerRoutes.length);
    expect(new Set(ids).size, 'operationIds are unique').toBe(ids.length);
  });

  it('documents one error shape with the request id, and one shared 422 schema on every operation that validates input', async () => {
    const doc = (await api.request('GET', '/api/partner/v1/openapi.json')).body;
    const { Error: error, ValidationError: invalid, ValidationIssue: issue } = doc.components.schemas;
    expect(error.required).toEqual(['detail', 'request_id']);
    expect(invalid.required).toEqual(['detail', 'request_id']);
    expect(invalid.properties.detail.items.$ref).toBe('#/components/schemas/ValidationIssue');
    expect(issue.required).toEqual(['loc', 'msg', 'type']);
    expect(issue.properties.type.enum).toEqual(expect.arrayContaining(['too_small', 'invalid_type', 'nul_character', 'lone_surrogate']));
    let with422 = 0;
    for (const [path, item] of Object.entries<Record<string, { responses: Record<string, { content?: Record<string, { schema: { $ref?: string; allOf?: { $ref?: string }[] } }> }> }>>(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const route = partnerRoutes.find((r) => r.path === path && r.method === method)!;
        // every operation with a body or a query validates input, so it can answer 422
        if (route.body || route.query) expect(op.responses['422'], `${method} ${path} 422`).toBeDefined();
        for (const [status, res] of Object.entries(op.responses)) {
          if (Number(status) < 400) continue;
          const schema = res.content!['application/json'].schema;
          if (status === '422') {
            with422++;
            expect(schema, `${method} ${path} 422`).toEqual({ $ref: '#/components/schemas/ValidationError' });
          } else expect(schema.allOf?.[0], `${method} ${path} ${status}`).toEqual({ $ref: '#/components/schemas/Error' });
        }
      }
    }
    expect(with422).toBeGreaterThanOrEqual(partnerRoutes.filter((r) => r.body || r.query).length);
  });
});
