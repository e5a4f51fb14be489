import { setTimeout as sleep } from 'node:timers/promises';
import { AppError, errorBody, Errors, INTERNAL_ERROR_BODY, withRequestId } from '../../errors.js';
import { sha256 } from '../../lib/crypto.js';
import { webhookRuntime } from '../../webhooks/runtime.js';
import type { ApiContext } from '../route.js';
import { claimKey, IDEMPOTENCY_LOCK_MS, purgeExpiredKeys, releaseKey, saveResponse, type StoredResponse } from './store.js';

/** Stripe's name for the header that marks a replayed response. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';
const KEY_RE = /^[\x21-\x7e]{1,255}$/;
/** A duplicate waits for the first request this long (its lock, then a little), then gets 409. */
const WAIT_MS = IDEMPOTENCY_LOCK_MS + 5_000;
const PURGE_EVERY_MS = 3600_000;
let lastPurge = 0;

/**
 * `Idempotency-Key` on a POST, with Stripe's semantics (docs/api-decisions.md):
 * the first response to a key is stored for 24 h; the same key with the same
 * request (method, path and body, compared as JSON with sorted keys) replays it
 * with `Idempotent-Replayed: true`; with another request it is 409
 * `idempotency_key_reused`; while the first still runs, a duplicate waits for it.
 * A request that did not run (422, 503) stores nothing: a corrected retry may
 * reuse the key. Without the header nothing changes; a blank one is 400.
 */
export async function idempotent(ctx: ApiContext, rawBody: unknown, run: () => Promise<void>): Promise<void> {
  // a header sent blank (Node strips the blanks) is a mistake, not "no key": refused, so the client sees it
  if (ctx.req.headers['idempotency-key'] === undefined) return run();
  const key = ctx.get('idempotency-key');
  if (!KEY_RE.test(key)) throw Errors.badRequest('Idempotency-Key must be 1-255 visible ASCII characters');
  const { deps, auth } = ctx.state;
  const partnerId = auth.partner.id;
  const hash = sha256(`${ctx.method} ${ctx.path}\n${canonicalJson(rawBody)}`);
  const giveUpAt = Date.now() + WAIT_MS;
  for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
    const claim = await claimKey(deps.sql, partnerId, key, hash, deps.clock.now());
    if (claim.kind === 'owner') break;
    if (claim.kind === 'mismatch') throw Errors.idempotencyKeyReused();
    if (claim.kind === 'replay') return replay(ctx, claim.response, partnerId);
    if (Date.now() + delay > giveUpAt) throw Errors.idempotencyKeyInUse();
    await sleep(delay);
  }
  if (Date.now() - lastPurge > PURGE_EVERY_MS) {
    lastPurge = Date.now();
    purgeExpiredKeys(deps.sql, deps.clock.now()).catch((err) => deps.log.warn({ err: String(err) }, 'idempotency keys: purge failed'));
  }

  // Stored bodies are sealed like webhook secrets (AES-256-GCM, WEBHOOK_SECRET_KEYS, the partner id as
  // associated data): a link's body holds its token, which is otherwise never stored.
  const box = webhookRuntime(deps).secrets;
  const stored = (status: number, json: string | null): StoredResponse => ({ status, body: json === null ? null : box.seal(json, partnerId) });
  let response: StoredResponse | null = null;
  try {
    await run();
    // serialised once: the text that is sealed is the text that is sent
    let json: string | null = null;
    if (ctx.body !== undefined && ctx.body !== null) {
      json = JSON.stringify(ctx.body);
      ctx.body = json;
      ctx.type = 'application/json';
    }
    response = stored(ctx.status, json);
  } catch (err) {
    if (!(err instanceof AppError)) response = stored(500, JSON.stringify(INTERNAL_ERROR_BODY));
    else if (err.status !== 422 && err.status !== 503 && err.status !== 429) response = stored(err.status, JSON.stringify(errorBody(err)));
    throw err;
  } finally {
    // The handler may have written (a 500 after a commit): its outcome is kept, so a retry never runs it twice.
    await (response ? saveResponse(deps.sql, partnerId, key, response) : releaseKey(deps.sql, partnerId, key)).catch((err) =>
      deps.log.warn({ err: String(err), request_id: ctx.state.requestId }, 'idempotency key: could not record the outcome'),
    );
  }
}

function replay(ctx: ApiContext, r: StoredResponse, partnerId: string): void {
  ctx.status = r.status;
  ctx.set(REPLAYED_HEADER, 'true');
  if (r.body !== null) {
    const json = webhookRuntime(ctx.state.deps).secrets.open(r.body, partnerId);
    // an error is stored without a request id; it answers with this request's, like X-Request-Id
    ctx.body = r.status >= 400 ? JSON.stringify(withRequestId(JSON.parse(json) as { detail: unknown }, ctx.state.requestId)) : json;
    ctx.type = 'application/json';
  }
}

/** JSON with object keys sorted, so a retry that orders its fields differently is the same request. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}
