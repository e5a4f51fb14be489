import type { z } from 'zod';
import { Errors, type ValidationIssue } from '../../errors.js';

/** Parses one part of the request; failures become 422 with FastAPI-style `loc` paths. */
export function parsePart<T extends z.ZodType>(schema: T, value: unknown, where: 'body' | 'query' | 'path'): z.infer<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw Errors.validation(toIssues(result.error, where));
}

export function toIssues(error: z.ZodError, where: string): ValidationIssue[] {
  return error.issues.map((i) => ({
    loc: [where, ...i.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
    msg: i.message,
    type: i.code,
  }));
}
