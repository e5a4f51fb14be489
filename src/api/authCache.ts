import { AUTH_CHANGED_CHANNEL, authenticateApiKey, type Authenticated } from '../domain/apiKeys.js';
import type { Deps } from '../deps.js';
import { sha256 } from '../lib/crypto.js';

/**
 * Key lookups cached per API process, so a request costs one Postgres round
 * trip instead of two. Revocation and suspension still apply at once: they
 * NOTIFY `auth_changed` on commit and every process drops that partner's
 * entries. If the LISTEN connection drops, notifications could be missed, so the
 * whole cache is cleared on every (re)connect; entries also expire after `ttlMs`
 * as a last backstop. Unknown keys are not cached (no memory growth from
 * garbage keys).
 */
export class AuthCache {
  private readonly entries = new Map<string, { auth: Authenticated; expires: number }>();
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly deps: Pick<Deps, 'sql' | 'readSql' | 'log'>,
    private readonly ttlMs = 30_000,
    private readonly maxEntries = 10_000,
  ) {}

  async start(): Promise<void> {
    const req = await this.deps.sql.listen(
      AUTH_CHANGED_CHANNEL,
      (partnerId) => this.dropPartner(partnerId),
      () => this.entries.clear(),
    );
    this.unlisten = req.unlisten;
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
    this.entries.clear();
  }

  async authenticate(apiKey: string): Promise<Authenticated | null> {
    const cacheKey = sha256(apiKey).toString('base64');
    const hit = this.entries.get(cacheKey);
    if (hit && hit.expires > Date.now()) return hit.auth;
    const auth = await authenticateApiKey(this.deps.readSql, apiKey);
    if (auth) {
      if (this.entries.size >= this.maxEntries) this.entries.clear();
      this.entries.set(cacheKey, { auth, expires: Date.now() + this.ttlMs });
    } else {
      this.entries.delete(cacheKey);
    }
    return auth;
  }

  private dropPartner(partnerId: string): void {
    for (const [k, v] of this.entries) if (v.auth.partner.id === partnerId) this.entries.delete(k);
  }
}
