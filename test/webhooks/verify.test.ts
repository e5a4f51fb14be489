import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox, generateWebhookSecret } from '../../src/webhooks/secrets.js';
import { eventBody, signatureHeader } from '../../src/webhooks/signing.js';
import { verifyWebhookSignature } from '../../src/webhooks/verify.js';

const secret = 'whsec_test0123456789';
const body = eventBody({ id: 7, type: 'webhook.test', created_at: new Date('2026-03-01T10:00:00Z'), data: { message: 'hi ✓' } });
const now = Date.parse('2026-03-01T10:00:05Z');
const t = Math.floor(now / 1000);

describe('signature (sender) and verifyWebhookSignature (receiver)', () => {
  it('signs "<t>." + raw body with HMAC-SHA256 keyed with the secret string, as lowercase hex', () => {
    // reference value from an independent implementation (the openssl CLI)
    const out = execFileSync('openssl', ['dgst', '-sha256', '-hmac', secret], { input: `${t}.${body}` }).toString();
    const expected = /([0-9a-f]{64})\s*$/.exec(out)![1];
    expect(signatureHeader(secret, t, body)).toBe(`t=${t},v1=${expected}`);
  });

  it('accepts a valid signature over the raw body, as string or bytes', () => {
    const h = signatureHeader(secret, t, body);
    expect(verifyWebhookSignature(body, h, secret, { now })).toEqual({ ok: true, timestamp: t });
    expect(verifyWebhookSignature(Buffer.from(body), h, secret, { now }).ok).toBe(true);
  });

  it('rejects a changed body, a wrong secret, and re-serialised JSON', () => {
    const h = signatureHeader(secret, t, body);
    expect(verifyWebhookSignature(body.replace('hi', 'ho'), h, secret, { now })).toEqual({ ok: false, reason: 'no_matching_signature' });
    expect(verifyWebhookSignature(body, h, `${secret}x`, { now }).ok).toBe(false);
    expect(verifyWebhookSignature(JSON.stringify(JSON.parse(body), null, 1), h, secret, { now }).ok).toBe(false);
  });

  it('rejects timestamps older than 300 s (and as far in the future), accepts within', () => {
    const at = (dt: number) => signatureHeader(secret, t + dt, body);
    expect(verifyWebhookSignature(body, at(-300), secret, { now }).ok).toBe(true);
    expect(verifyWebhookSignature(body, at(-301), secret, { now })).toEqual({ ok: false, reason: 'timestamp_too_old' });
    expect(verifyWebhookSignature(body, at(301), secret, { now })).toEqual({ ok: false, reason: 'timestamp_in_future' });
    expect(verifyWebhookSignature(body, at(-1000), secret, { now, toleranceSeconds: 1200 }).ok).toBe(true);
  });

  it('accepts the header when any one of several v1 values matches, in any order, with spaces', () => {
    const good = signatureHeader(secret, t, body).split(',')[1];
    const bad = `v1=${'0'.repeat(64)}`;
    expect(verifyWebhookSignature(body, `t=${t}, ${bad}, ${good}`, secret, { now }).ok).toBe(true);
    expect(verifyWebhookSignature(body, `${good},t=${t}`, secret, { now }).ok).toBe(true);
    expect(verifyWebhookSignature(body, `t=${t},${bad},v0=${'1'.repeat(64)}`, secret, { now }).ok).toBe(false);
  });

  it('rejects missing and malformed headers', () => {
    const v1 = signatureHeader(secret, t, body).split(',')[1];
    expect(verifyWebhookSignature(body, undefined, secret, { now }).reason).toBe('missing_header');
    expect(verifyWebhookSignature(body, '', secret, { now }).reason).toBe('missing_header');
    for (const h of [v1, `t=${t}`, `t=abc,${v1}`, `t=${t},t=${t},${v1}`, `t=${t},v1=XYZ`, `t=${t},v1=${'A'.repeat(64)}`, 'garbage']) {
      expect(verifyWebhookSignature(body, h, secret, { now }), h).toEqual({ ok: false, reason: 'malformed_header' });
    }
  });
});

describe('webhook secrets', () => {
  it('are whsec_ followed by 43 base62 characters (about 256 random bits), all different', () => {
    const s = new Set(Array.from({ length: 200 }, generateWebhookSecret));
    expect(s.size).toBe(200);
    for (const x of s) expect(x).toMatch(/^whsec_[0-9A-Za-z]{43}$/);
    expect(43 * Math.log2(62)).toBeGreaterThan(192);
  });

  it('are sealed with AES-256-GCM bound to the partner, and open under any listed key (rotation)', () => {
    const k1 = randomBytes(32).toString('base64');
    const k2 = randomBytes(32).toString('base64');
    const old = new SecretBox([k1]);
    const sealed = old.seal('whsec_abc', 'ptr_1');
    expect(sealed).toMatch(/^gcm1\.[0-9a-f]{8}\./);
    expect(sealed).not.toContain('abc');
    expect(old.seal('whsec_abc', 'ptr_1')).not.toBe(sealed); // fresh IV
    expect(old.open(sealed, 'ptr_1')).toBe('whsec_abc');
    expect(() => old.open(sealed, 'ptr_2')).toThrow();
    const rotated = new SecretBox([k2, k1]);
    expect(rotated.open(sealed, 'ptr_1')).toBe('whsec_abc');
    expect(rotated.seal('whsec_abc', 'ptr_1').split('.')[1]).not.toBe(sealed.split('.')[1]);
    expect(() => new SecretBox([k2]).open(sealed, 'ptr_1')).toThrow(/not in WEBHOOK_SECRET_KEYS/);
    const tampered = sealed.slice(0, -2) + (sealed.endsWith('AA') ? 'BB' : 'AA');
    expect(() => old.open(tampered, 'ptr_1')).toThrow();
  });

  it('are never kept as is: a box without a key refuses to seal, and still opens a value stored unsealed before', () => {
    const box = new SecretBox([]);
    expect(box.encrypts).toBe(false);
    expect(() => box.seal('whsec_x', 'p')).toThrow(/WEBHOOK_SECRET_KEYS/);
    expect(box.open('plain.whsec_x', 'p')).toBe('whsec_x');
  });
});
