import type { ApiContext } from './route.js';

/**
 * RFC 9110 13.1.2 If-None-Match, as an origin server evaluates it for GET:
 * `*` matches any current representation; otherwise the header is a list of
 * entity tags, compared weakly (`W/"x"` matches `"x"` and `W/"x"`).
 * Not the `fresh` package Koa uses for `ctx.fresh`: it treats a request's
 * `Cache-Control: no-cache` as a mismatch and, when If-Modified-Since is sent
 * too, requires both, where RFC 9110 says If-Modified-Since is then ignored.
 */
export function ifNoneMatchMatches(header: string, etag: string): boolean {
  const value = header.trim();
  if (!value) return false;
  if (value === '*') return true;
  const target = opaqueTag(etag);
  for (const m of value.matchAll(/(?:W\/)?"[\x21\x23-\x7e\x80-\xff]*"/g)) if (opaqueTag(m[0]) === target) return true;
  return false;
}

const opaqueTag = (tag: string) => (tag.startsWith('W/') ? tag.slice(2) : tag);

/**
 * Sets `ETag` and answers 304 Not Modified (no body) when If-None-Match
 * matches it. Returns true when it answered. Headers a 200 would carry
 * (Cache-Control, Last-Modified) must be set before, so the 304 carries them too.
 */
export function answerNotModified(ctx: ApiContext, etag: string): boolean {
  ctx.set('ETag', etag);
  if (!ifNoneMatchMatches(ctx.get('if-none-match'), etag)) return false;
  ctx.status = 304;
  ctx.body = null;
  return true;
}
