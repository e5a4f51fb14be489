import { createHmac, hash, randomBytes, randomFillSync } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * CSPRNG bytes drawn from a 4 KiB pool refilled by one randomFillSync, as
 * Node does for randomUUID: a call per id (one per API request) was 2 % of
 * the API's CPU. Each byte is used once.
 */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;
function randomByte(): number {
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  return pool[poolAt++];
}

/** Random base62 string of `length` chars (~5.95 bits each), without modulo bias. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const b = randomByte();
    if (b < 248) out += BASE62[b % 62];
  }
  return out;
}

/** Service-assigned identifiers: `<prefix>_<22 base62 chars>` (~131 random bits). */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(22)}`;
}

/** URL-safe random token of `bytes` random bytes. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

export function sha256(value: string): Buffer {
  return hash('sha256', value, 'buffer'); // one-shot: cheaper than createHash().update().digest()
}

export function hmacHex(key: Buffer | string, value: string): string {
  return createHmac('sha256', key).update(value, 'utf8').digest('hex');
}

