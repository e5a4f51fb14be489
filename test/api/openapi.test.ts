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
});
