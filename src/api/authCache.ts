import { AUTH_CHANGED_CHANNEL, authenticateApiKey, type Authenticated } from '../domain/apiKeys.js';
import type { Deps } from '../deps.js';
import { constantTimeEqual, sha256 } from '../lib/crypto.js';

/**
 * Key lookups cached per API process, so a request costs one Postgres round
 * trip instead of two. Revocation and suspension still apply at once: they
 * NOTIFY `auth_changed` on commit and every process drops that partner's
 * entries. If the LISTEN connection drops, notifications could be missed, so the
 * whole cache is cleared on every (re)connect; entries also expire after `ttlMs`
 * as a last backstop. Unknown keys are not cached (no memory growth from
 * garbage keys).
 *
 * A keep-alive connection presents the same key on every request, so the
 * connection remembers the key it last authenticated: the next request with
 * that key costs a string comparison instead of a hash (the sha256 was the
 * partner API's largest cost of its own, docs/benchmarks.md). Every
 * notification and reconnect moves `generation`, which voids what every
 * connection remembers (it looks the key up again in the map). A lookup that
 * was in flight while the generation moved is not cached: it may have read the
 * key before the change that was just announced.
 */
export class AuthCache {
  private readonly entries = new Map<string, { auth: Authenticated; expires: number }>();
  private readonly byConnection = new WeakMap<object, { apiKey: string; auth: Authenticated; expires: number; generation: number }>();
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

  /** `connection`: the request's socket, which remembers the key it last authenticated. */
  async authenticate(apiKey: string, connection?: object): Promise<Authenticated | null> {
    const now = Date.now();
    const remembered = connection && this.byConnection.get(connection);
    // constant time: behind a proxy, one upstream connection carries several clients' requests
    if (remembered && remembered.generation === this.generation && remembered.expires > now && constantTimeEqual(remembered.apiKey, apiKey)) {
      return remembered.auth;
    }
    const generation = this.generation;
    const cacheKey = sha256(apiKey).toString('base64');
    let hit = this.entries.get(cacheKey);
    if (!hit || hit.expires <= now) {
      const auth = await authenticateApiKey(this.deps.readSql, apiKey);
      if (!auth || generation !== this.generation) {
        this.entries.delete(cacheKey);
        return auth;
      }
      if (this.entries.size >= this.maxEntries) this.entries.clear();
      hit = { auth, expires: Date.now() + this.ttlMs };
      this.entries.set(cacheKey, hit);
    }
    if (connection) this.byConnection.set(connection, { apiKey, auth: hit.auth, expires: hit.expires, generation });
    return hit.auth;
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
