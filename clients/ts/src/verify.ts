import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Receiver-side check of `X-Whiteboard-Signature` (for partners, and for our
 * own tests). Self-contained on purpose: it imports nothing from the service,
 * so it can be copied into a receiver as is (docs/webhooks.md shows one).
 *
 *   const r = verifyWebhookSignature(rawBody, req.headers['x-whiteboard-signature'], secret);
 *   if (!r.ok) -> answer 400
 *
 * Rules of the spec: the HMAC is computed over the raw body, before any JSON
 * parsing; `t` older than the tolerance (300 s) is rejected, and so is a `t`
 * more than the tolerance in the future; signatures are compared in constant
 * time; any of several `v1=` values may match (room for signing with two
 * secrets at once).
 */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export type VerifyFailure =
  | 'missing_header'
  | 'malformed_header'
  | 'timestamp_too_old'
  | 'timestamp_in_future'
  | 'no_matching_signature';

export type VerifyResult = { ok: true; timestamp: number } | { ok: false; reason: VerifyFailure };

export interface VerifyOptions {
  /** seconds; default 300 */
  toleranceSeconds?: number;
  /** the receiver's clock, ms since the epoch; default Date.now() */
  now?: number;
}

export function verifyWebhookSignature(
  rawBody: string | Buffer,
  header: string | string[] | undefined | null,
  secret: string,
  opts: VerifyOptions = {},
): VerifyResult {
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!value) return { ok: false, reason: 'missing_header' };

  let timestamp: number | undefined;
  const candidates: Buffer[] = [];
  for (const part of value.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const key = part.slice(0, eq).trim();
    const val = part.slice(eq + 1).trim();
    if (key === 't') {
      if (!/^\d{1,12}$/.test(val) || timestamp !== undefined) return { ok: false, reason: 'malformed_header' };
      timestamp = Number(val);
    } else if (key === 'v1' && /^[0-9a-f]{64}$/.test(val)) {
      candidates.push(Buffer.from(val, 'hex'));
    }
  }
  if (timestamp === undefined || candidates.length === 0) return { ok: false, reason: 'malformed_header' };

  const tolerance = opts.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const nowSeconds = Math.floor((opts.now ?? Date.now()) / 1000);
  if (timestamp < nowSeconds - tolerance) return { ok: false, reason: 'timestamp_too_old' };
  if (timestamp > nowSeconds + tolerance) return { ok: false, reason: 'timestamp_in_future' };

  const expected = createHmac('sha256', secret).update(`${timestamp}.`, 'utf8').update(rawBody).digest();
  // Check every candidate (no early exit) so the time taken does not tell which one matched.
  let match = false;
  for (const c of candidates) match = timingSafeEqual(c, expected) || match;
  return match ? { ok: true, timestamp } : { ok: false, reason: 'no_matching_signature' };
}
