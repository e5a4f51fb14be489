import { AUTH_CHANGED_CHANNEL } from '../db/channels.js';
import { authenticateApiKey, isApiKeyShaped, type Authenticated } from '../domain/apiKeys.js';
import type { Deps } from '../deps.js';
import { READ_WAIT_MS, readOrUnavailable } from '../db/errors.js';
import { listenSurely } from '../db/listen.js';

/** Unknown keys are remembered this long (docs/api-decisions.md, "Authentication"). */
const NEGATIVE_TTL_MS = 60_000;
/** A key found valid lets its address past the unauthenticated limit for this long (a gate to a lookup, never a login). */
const KNOWN_VALID_MS = 10 * 60_000;

/**
 * Key lookups cached per API process, so a request costs one Postgres round
 * trip instead of two. Revocation and suspension still apply at once: they
 * NOTIFY `auth_changed` on commit and every process drops that partner's
 * entries. If the LISTEN connection drops, notifications could be missed, so the
 * whole cache is cleared on every (re)connect; entries also expire after `ttlMs`
 * as a last backstop.
 *
 * Concurrent requests with the same uncached key share one lookup.
 * Unknown keys are remembered too (a negative cache, `NEGATIVE_TTL_MS`, at
 * most `maxEntries`, the oldest forgotten first), so a client repeating a bad
 * key costs no Postgres lookup. Only keys no row has: a revoked key or a
 * suspended partner's is looked up each time (a resume must work at once,
 * before its notification arrives), and the per-address limit bounds that. A key created later must not be refused from
 * that memory: creating a key notifies `auth_changed` as well, and every
 * notification forgets all unknown keys (creations are rare; a wrong "unknown"
 * would lock a partner out for a minute, a forgotten one costs one lookup).
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
  private readonly entries = new Map<string, { auth: Authenticated; expires: number; knownUntil: number }>();
  private readonly unknown = new Map<string, number>();
  /** lookups in flight: concurrent requests with the same uncached key share one */
  private readonly inflight = new Map<string, { generation: number; lookup: Promise<Authenticated | null> }>();
  private generation = 0;
  private unlisten: (() => Promise<void>) | undefined;
  /** key lookups sent to Postgres (a figure for tests and benchmarks) */
  lookupsMade = 0;

  constructor(
    private readonly deps: Pick<Deps, 'sql' | 'readSql' | 'log' | 'clock'>,
    private readonly ttlMs = 30_000,
    private readonly maxEntries = 10_000,
  ) {}

  async start(): Promise<void> {
    const req = await listenSurely(
      this.deps.sql,
      AUTH_CHANGED_CHANNEL,
      (partnerId) => this.dropPartner(partnerId),
      () => this.clear(),
      this.deps.log,
    );
    this.unlisten = req.unlisten;
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
    this.clear();
  }

  /** The partner behind a key from memory alone (no lookup), while the entry is fresh. */
  cached(apiKey: string): Authenticated | undefined {
    const hit = this.entries.get(apiKey);
    return hit && hit.expires > this.now() ? hit.auth : undefined;
  }

  /** Whether this process found the key valid within KNOWN_VALID_MS (it may have been revoked since: look it up). */
  knownValid(apiKey: string): boolean {
    const hit = this.entries.get(apiKey);
    return !!hit && hit.knownUntil > this.now();
  }

  async authenticate(apiKey: string): Promise<Authenticated | null> {
    const now = this.now();
    const hit = this.entries.get(apiKey);
    if (hit && hit.expires > now) return hit.auth;
    if (!isApiKeyShaped(apiKey)) return null; // neither looked up nor remembered
    const bad = this.unknown.get(apiKey);
    if (bad !== undefined) {
      if (bad > now) return null;
      this.unknown.delete(apiKey);
    }
    // joined only within one generation: a request that arrives after a revocation was heard
    // must not be answered by a lookup that may have read the key before it
    const running = this.inflight.get(apiKey);
    if (running && running.generation === this.generation) return running.lookup;
    const entry = { generation: this.generation, lookup: this.lookup(apiKey) };
    this.inflight.set(apiKey, entry);
    void entry.lookup.finally(() => {
      if (this.inflight.get(apiKey) === entry) this.inflight.delete(apiKey);
    }).catch(() => undefined);
    return entry.lookup;
  }

  private async lookup(apiKey: string): Promise<Authenticated | null> {
    const generation = this.generation;
    this.lookupsMade++;
    const found = await readOrUnavailable(() => authenticateApiKey(this.deps.readSql, apiKey), undefined, READ_WAIT_MS);
    const auth = typeof found === 'string' ? null : found;
    if (generation !== this.generation || !auth) {
      this.entries.delete(apiKey);
      if (found === 'unknown' && generation === this.generation) this.rememberUnknown(apiKey);
      return auth;
    }
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    const at = this.now();
    this.entries.set(apiKey, { auth, expires: at + this.ttlMs, knownUntil: at + Math.max(this.ttlMs, KNOWN_VALID_MS) });
    return auth;
  }

  private rememberUnknown(apiKey: string): void {
    this.unknown.delete(apiKey);
    if (this.unknown.size >= this.maxEntries) this.unknown.delete(this.unknown.keys().next().value!);
    this.unknown.set(apiKey, this.now() + NEGATIVE_TTL_MS);
  }

  private now(): number {
    return this.deps.clock.now().getTime();
  }

  private clear(): void {
    this.generation++;
    this.entries.clear();
    this.unknown.clear();
  }

  private dropPartner(partnerId: string): void {
    this.generation++;
    this.unknown.clear();
    for (const [k, v] of this.entries) if (v.auth.partner.id === partnerId) this.entries.delete(k);
  }
}
