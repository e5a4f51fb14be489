import type { z } from 'zod';
import { AppError, Errors, type ValidationIssue } from '../../errors.js';

/**
 * Parses one part of the request; failures become 422 with FastAPI-style `loc`
 * paths. Strings (and object keys) holding U+0000 are refused here too, with
 * type `nul_character`: Postgres text and jsonb cannot store that character,
 * so without this such input would fail in the database as a 500.
 */
export function parsePart<T extends z.ZodType>(schema: T, value: unknown, where: 'body' | 'query' | 'path'): z.infer<T> {
  const result = schema.safeParse(value);
  if (!result.success) throw Errors.validation(toIssues(result.error, where));
  const nul = nulIssues(result.data, [where]);
  if (nul.length) throw Errors.validation(nul);
  return result.data;
}

/**
 * Path parameters name a resource: a value no resource can have (too long, not
 * a number, NUL) names nothing, so it answers 404 `not_found` like an unknown
 * id, not 422 (docs/api-decisions.md). The schema's description names the resource.
 */
export function parsePath<T extends z.ZodObject>(schema: T, value: unknown): z.infer<T> {
  try {
    return parsePart(schema, value, 'path');
  } catch (err) {
    if (err instanceof AppError && err.status === 422) throw Errors.notFound(schema.description ?? 'Resource');
    throw err;
  }
}

export function toIssues(error: z.ZodError, where: string): ValidationIssue[] {
  return error.issues.map((i) => ({
    loc: [where, ...i.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
    msg: i.message,
    type: i.code,
  }));
}

function nulIssues(value: unknown, loc: (string | number)[], out: ValidationIssue[] = []): ValidationIssue[] {
  const issue = (at: (string | number)[]) => out.push({ loc: at, msg: 'must not contain the NUL character (U+0000)', type: 'nul_character' });
  if (typeof value === 'string') {
    if (value.includes('\0')) issue(loc);
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => nulIssues(v, [...loc, i], out));
  } else if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    for (const [k, v] of Object.entries(value)) {
      if (k.includes('\0')) issue([...loc, k]);
      nulIssues(v, [...loc, k], out);
    }
  }
  return out;
}
