import { z } from 'zod';

/** Digits, optionally signed, with an optional fraction: what a number in a query string may look like. */
const NUMERIC = /^-?\d+(\.\d+)?$/;

/**
 * A number in the query string, checked by `schema` (bounds, integer, default).
 * Only a plain decimal is read as a number: z.coerce.number reads an empty
 * value (`?offset=`) and blanks as 0 and `1e3` or `0x10` as numbers, so a
 * mistake passed silently as another value. Anything else fails the schema's
 * type check: 422 at the field's `loc`, like every query mistake
 * (docs/api-decisions.md, "Errors"). The OpenAPI document shows `schema`.
 */
export function queryNumber<T extends z.ZodType<number | undefined>>(schema: T) {
  return z.preprocess((v) => (typeof v === 'string' && NUMERIC.test(v) ? Number(v) : v), schema);
}
