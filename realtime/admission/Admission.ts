import type { Deps } from '../../src/deps.js';
import { linkTokenHash, type ResolvedLink } from '../../src/domain/links.js';
import { Batcher } from '../../src/lib/Batcher.js';
import type { LinkSource } from './LinkSource.js';

export type Refusal = { ok: false; status: 400 | 401 | 403 | 410 | 429 | 503; code: string; message: string };
export type LinkCheck = { ok: true; link: ResolvedLink } | Refusal;

export const refusals = {
  unauthorized: { ok: false, status: 401, code: 'unauthorized', message: 'Unknown or expired link' } as Refusal,
  archived: { ok: false, status: 410, code: 'archived', message: 'The lesson was deleted' } as Refusal,
  origin: { ok: false, status: 403, code: 'forbidden', message: 'Origin not allowed' } as Refusal,
  perIp: { ok: false, status: 429, code: 'rate_limited', message: 'Too many connections from this address' } as Refusal,
  unavailable: { ok: false, status: 503, code: 'unavailable', message: 'Service temporarily unavailable' } as Refusal,
};

const CACHE_MAX = 50_000;
/** Lookups of uncached tokens arriving within this many ms share one statement. */
const LOOKUP_BATCH_MS = 1;
const LOOKUP_BATCH_MAX = 100;
const ARCHIVED_MAX = 10_000;

/**
 * Who may open the participant page and the WebSocket: the link token (one
 * index probe by its sha256, lookups of one millisecond batched into one
 * statement, cached for GATEWAY_TOKEN_CACHE_SECONDS), its
 * expiry (deps.clock), the lesson not archived, the Origin allowlist, and a
 * per-IP connection cap (per node: docs/protocol.md).
 *
 * The cache is keyed by the token's hash, never the token. A link issued while
 * this node listens arrives by `link_issued` (sent by Postgres only when the
 * link committed) and stays cached until it expires, so its first upgrade
 * needs no lookup; the most recent CACHE_MAX links are kept, older ones are
 * looked up as before. An archive is seen at once through `markArchived` (the
 * gateway hears lesson_archived): the lesson's cached links are dropped and
 * refused. A missed notification is only a cache miss, except a missed
 * archive: so the whole cache is dropped whenever the LISTEN connection
 * (re)connects, as the API's key cache does.
 */
export class Admission {
  private readonly cache = new Map<string, { link: ResolvedLink; at: number; pushed: boolean }>();
  /** cache keys by lesson, to drop a deleted lesson's links */
  private readonly byLesson = new Map<string, Set<string>>();
  private unlisten: (() => Promise<void>) | undefined;
  /** tokens looked up in Postgres (a figure for tests and benchmarks) */
  lookupsMade = 0;
  private readonly archived = new Map<string, true>();
  private readonly perIp = new Map<string, number>();
  private readonly ttlMs: number;
  private readonly origins: Set<string>;
  private readonly lookups: Batcher<Buffer, ResolvedLink | undefined>;

  constructor(
    private readonly deps: Pick<Deps, 'config' | 'clock'>,
    /** the links (Postgres: postgresLinks) */
    private readonly links: LinkSource,
  ) {
    // a burst of arrivals (a class joining) costs one index probe per token but one round trip per batch
    this.lookups = new Batcher((hashes) => {
      this.lookupsMade += hashes.length;
      return links.resolve(hashes);
    }, { delayMs: LOOKUP_BATCH_MS, max: LOOKUP_BATCH_MAX, concurrency: deps.config.DATABASE_READ_POOL_SIZE });
    this.ttlMs = deps.config.GATEWAY_TOKEN_CACHE_SECONDS * 1000;
    this.origins = new Set(deps.config.GATEWAY_ALLOWED_ORIGINS.map((o) => o.replace(/\/+$/, '').toLowerCase()));
  }

  /** Hears the links issued from now on (LINK_ISSUED_CHANNEL); drops the cache on every (re)connect. */
  async start(): Promise<void> {
    this.unlisten = await this.links.listen(
      (hash, link) => {
        if (!this.archived.has(link.lesson_id)) this.remember(hash, link, 0, true);
      },
      () => this.clear(),
    );
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
    this.clear();
  }

  async checkLink(token: string | undefined): Promise<LinkCheck> {
    // hashed once: the cache key and the lookup are the same sha256 the links table stores
    const hash = token ? linkTokenHash(token) : undefined;
    if (!hash) return refusals.unauthorized;
    const now = this.deps.clock.now().getTime();
    const key = hash.toString('base64');
    let entry = this.cache.get(key);
    if (!entry || (!entry.pushed && now - entry.at > this.ttlMs)) {
      const link = await this.lookups.add(hash);
      if (!link) return refusals.unauthorized;
      entry = this.ttlMs > 0 ? this.remember(key, link, now, false) : { link, at: now, pushed: false };
    }
    const { link } = entry;
    if (link.expires_at.getTime() <= now) return refusals.unauthorized;
    if (link.archived || this.archived.has(link.lesson_id)) return refusals.archived;
    return { ok: true, link };
  }

  /** An empty allowlist allows every origin; a request without Origin is not a browser and is allowed. */
  originAllowed(origin: string | undefined): boolean {
    if (this.origins.size === 0 || !origin) return true;
    return this.origins.has(origin.replace(/\/+$/, '').toLowerCase());
  }

  /** Takes a connection slot of this address (upgrade in progress or open); false when the cap is reached. */
  reserveIp(ip: string): boolean {
    const n = this.perIp.get(ip) ?? 0;
    if (n >= this.deps.config.GATEWAY_MAX_CONNECTIONS_PER_IP) return false;
    this.perIp.set(ip, n + 1);
    return true;
  }

  releaseIp(ip: string): void {
    const n = (this.perIp.get(ip) ?? 1) - 1;
    if (n <= 0) this.perIp.delete(ip);
    else this.perIp.set(ip, n);
  }

  markArchived(lessonId: string): void {
    this.archived.set(lessonId, true);
    if (this.archived.size > ARCHIVED_MAX) this.archived.delete(this.archived.keys().next().value!);
    for (const key of this.byLesson.get(lessonId) ?? []) this.cache.delete(key);
    this.byLesson.delete(lessonId);
  }

  /** A lesson's title, mode or subject mode changed: its cached links carry the new values. */
  updateLesson(u: { lesson_id: string; title: string; mode: ResolvedLink['lesson_mode']; subject_mode: ResolvedLink['subject_mode'] }): void {
    for (const key of this.byLesson.get(u.lesson_id) ?? []) {
      const link = this.cache.get(key)?.link;
      if (link) Object.assign(link, { lesson_title: u.title, lesson_mode: u.mode, subject_mode: u.subject_mode });
    }
  }

  /** Whether a token's link is in the cache; `heard`: put there by its issue notice, so it stays without a TTL (tests). */
  cached(token: string, opts: { heard?: boolean } = {}): boolean {
    const hash = linkTokenHash(token);
    const entry = hash && this.cache.get(hash.toString('base64'));
    return !!entry && (!opts.heard || entry.pushed);
  }

  private remember(key: string, link: ResolvedLink, at: number, pushed: boolean) {
    const entry = { link, at, pushed };
    this.forget(key);
    this.cache.set(key, entry);
    let keys = this.byLesson.get(link.lesson_id);
    if (!keys) this.byLesson.set(link.lesson_id, (keys = new Set()));
    keys.add(key);
    if (this.cache.size > CACHE_MAX) this.forget(this.cache.keys().next().value!);
    return entry;
  }

  private forget(key: string): void {
    const entry = this.cache.get(key);
    if (!entry) return;
    this.cache.delete(key);
    const keys = this.byLesson.get(entry.link.lesson_id);
    keys?.delete(key);
    if (keys?.size === 0) this.byLesson.delete(entry.link.lesson_id);
  }

  private clear(): void {
    this.cache.clear();
    this.byLesson.clear();
  }
}
