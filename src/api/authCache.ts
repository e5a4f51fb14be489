import { AUTH_CHANGED_CHANNEL, authenticateApiKey, type Authenticated } from '../domain/apiKeys.js';
import type { Deps } from '../deps.js';

/**
 * Key lookups cached per API process, so a request costs one Postgres round
 * trip instead of two. Revocation and suspension still apply at once: they
 * NOTIFY `auth_changed` on commit and every process drops that partner's
 * entries. If the LISTEN connection drops, notifications could be missed, so the
 * whole cache is cleared on every (re)connect; entries also expire after `ttlMs`
 * as a last backstop. Unknown keys are not cached (no memory growth from
 * garbage keys).
 *
 * Entries are keyed by the key itself, as the request carries it: hashing it
 * first (sha256) was the partner API's largest cost of its own
 * (docs/benchmarks.md), and the process holds the key while it serves the
 * request anyway. Keys are stored only as hashes, in Postgres. Every
 * notification and reconnect moves `generation`; a lookup that was in flight
 * while it moved is not cached: it may have read the key before the change
 * that was just announced.
 */
export class AuthCache {
  private readonly entries = new Map<string, { auth: Authenticated; expires: number }>();
  private generation = 0;
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
      () => this.clear(),
    );
    this.unlisten = req.unlisten;
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
    this.clear();
  }

  async authenticate(apiKey: string): Promise<Authenticated | null> {
    const hit = this.entries.get(apiKey);
    if (hit && hit.expires > Date.now()) return hit.auth;
    const generation = this.generation;
    const auth = await authenticateApiKey(this.deps.readSql, apiKey);
    if (!auth || generation !== this.generation) {
      this.entries.delete(apiKey);
      return auth;
    }
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(apiKey, { auth, expires: Date.now() + this.ttlMs });
    return auth;
  }

  private clear(): void {
    this.generation++;
    this.entries.clear();
  }

  private dropPartner(partnerId: string): void {
    this.generation++;
    for (const [k, v] of this.entries) if (v.auth.partner.id === partnerId) this.entries.delete(k);
  }
}
