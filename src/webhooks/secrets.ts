import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { randomBase62 } from '../lib/crypto.js';

/** `whsec_` + 43 base62 characters: ~256 random bits (the issue asks for at least 192). */
export function generateWebhookSecret(): string {
  return `whsec_${randomBase62(43)}`;
}

/**
 * Seals webhook secrets at rest. The dispatcher has to sign with the secret
 * itself, so it cannot be kept as a one-way hash; instead it is encrypted with
 * AES-256-GCM under the first key of WEBHOOK_SECRET_KEYS, with the partner id as
 * associated data (a sealed value copied to another partner's row does not
 * open). Every listed key can open, so keys rotate by putting the new key first.
 *
 * Stored forms:
 *   `gcm1.<key id>.<base64url(iv | ciphertext | tag)>`   key id = 8 hex of sha256(key)
 *   `plain.<secret>`   written by versions that stored secrets unsealed when no key was set:
 *                      still opened, never written (a box without keys refuses to seal;
 *                      src/webhooks/keys.ts makes sure a process that seals has keys)
 */
export class SecretBox {
  private readonly keys: { id: string; key: Buffer }[];

  constructor(base64Keys: readonly string[]) {
    this.keys = base64Keys.map((k) => {
      const key = Buffer.from(k, 'base64');
      if (key.length !== 32) throw new Error('webhook secret keys must be 32 bytes');
      return { id: createHash('sha256').update(key).digest('hex').slice(0, 8), key };
    });
  }

  get encrypts(): boolean {
    return this.keys.length > 0;
  }

  seal(secret: string, partnerId: string): string {
    const current = this.keys[0];
    if (!current) throw new Error('nothing can be sealed without a key: set WEBHOOK_SECRET_KEYS');
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', current.key, iv);
    cipher.setAAD(Buffer.from(partnerId, 'utf8'));
    const ct = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return `gcm1.${current.id}.${Buffer.concat([iv, ct, cipher.getAuthTag()]).toString('base64url')}`;
  }

  open(sealed: string, partnerId: string): string {
    if (sealed.startsWith('plain.')) return sealed.slice('plain.'.length);
    const [scheme, keyId, payload] = sealed.split('.');
    if (scheme !== 'gcm1' || !payload) throw new Error('unknown webhook secret format');
    const entry = this.keys.find((k) => k.id === keyId);
    if (!entry) throw new Error(`webhook secret sealed with key ${keyId}, which is not in WEBHOOK_SECRET_KEYS`);
    const raw = Buffer.from(payload, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', entry.key, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(partnerId, 'utf8'));
    decipher.setAuthTag(raw.subarray(raw.length - 16));
    return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString('utf8');
  }
}

/**
 * What signs a partner's deliveries: the current secret and, during a rotation
 * with overlap (`PUT /webhook` with `rotate: true`), the previous one until
 * `previousUntil`. It is sealed as one value in `webhooks.secret`, so every
 * reader of that column (the dispatcher's claim) carries both without a schema
 * change. Plain form: `whsec_new` alone, or `whsec_new whsec_old <until ms>`
 * (secrets are base62, so a space never occurs in one).
 */
export interface SigningSecrets {
  current: string;
  previous?: { secret: string; until: Date };
}

export function encodeSigningSecrets(s: SigningSecrets): string {
  return s.previous ? `${s.current} ${s.previous.secret} ${s.previous.until.getTime()}` : s.current;
}

export function decodeSigningSecrets(value: string): SigningSecrets {
  const [current, previous, until] = value.split(' ');
  if (!previous || !until) return { current };
  return { current, previous: { secret: previous, until: new Date(Number(until)) } };
}

/** The secrets that sign an attempt made at `at`: the current one first, then the previous one while it is still valid. */
export function activeSecrets(value: string, at: Date): string[] {
  const s = decodeSigningSecrets(value);
  return s.previous && at.getTime() < s.previous.until.getTime() ? [s.current, s.previous.secret] : [s.current];
}
