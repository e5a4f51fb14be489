import { afterAll, expect } from 'vitest';
import { startApi } from '../../src/server.js';
import type { Clock } from '../../src/lib/clock.js';
import { makeDeps } from './deps.js';

export const PREFIX = '/api/partner/v1';

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** An error body of the partner API: the spec's `detail` and the request's id (docs/api-decisions.md, "Errors"). */
export const apiError = (code: string, message: unknown = expect.any(String)) => ({ detail: { code, message }, request_id: expect.any(String) });

/** A 422 body: one item per failing field. */
export const validationError = (detail: unknown[]) => ({ detail, request_id: expect.any(String) });

/** A real partner API on a free loopback port, with real Postgres and Redis; closed after the file. */
export async function startTestApi(opts: { env?: Record<string, string>; clock?: Clock } = {}) {
  const deps = makeDeps(opts);
  const api = await startApi(deps, 0);
  const base = `http://127.0.0.1:${api.port}`;
  afterAll(async () => {
    await api.close();
    await deps.close();
  });

  async function request<T = any>(
    method: string,
    path: string,
    o: { key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    let body: string | undefined = o.raw;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${base}${path.startsWith('/') && !path.startsWith(PREFIX) && !path.startsWith('/healthz') && !path.startsWith('/readyz') ? PREFIX + path : path}`, {
      method,
      headers,
      body,
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  return { deps, base, port: api.port, request };
}

/**
 * GET /lessons/{id}/preview as a partner reads it: a loaded machine can pass the
 * renderer's time limit (503 with Retry-After), and the partner asks again.
 */
export async function readPreview(base: string, lessonId: string, apiKey: string, tries = 10): Promise<Response> {
  const get = () => fetch(`${base}${PREFIX}/lessons/${lessonId}/preview`, { headers: { authorization: `Bearer ${apiKey}` } });
  let res = await get();
  for (let i = 0; i < tries && res.status === 503; i++) {
    await res.arrayBuffer();
    await new Promise((r) => setTimeout(r, 1500));
    res = await get();
  }
  return res;
}
