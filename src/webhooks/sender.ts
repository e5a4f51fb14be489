import { buildConnector, Pool } from 'undici';
import { AddressRejected, checkWebhookUrl, type AddressPolicy, type CheckedTarget, type Resolver } from './address.js';
import { activeSecrets } from './secrets.js';
import { deliveryHeaders, eventBody, signatureHeader, type DeliverableEvent } from './signing.js';

/** A delivery response body is read up to this many bytes, then dropped. */
export const MAX_RESPONSE_BYTES = 4096;

export interface AttemptInput {
  url: string;
  /** the opened value of `webhooks.secret`: one secret, or two during a rotation (secrets.ts) */
  secret: string;
  event: DeliverableEvent;
  /** the attempt's time: the signature's `t` */
  at: Date;
}

export interface AttemptOutcome {
  delivered: boolean;
  statusCode: number | null;
  /** why it failed, short and free of secrets; null when delivered or when the status says it */
  error: string | null;
  durationMs: number;
  /** the checked address the request went to */
  address: string | null;
}

export interface SenderOptions {
  policy: AddressPolicy;
  /** total limit of one attempt, DNS to last byte (WEBHOOK_TIMEOUT_MS) */
  timeoutMs: number;
  /** connections per (origin, address) pool */
  connections: number;
  /** tests only: trusted CA certificates instead of Node's store */
  ca?: string | string[];
}

interface PoolEntry {
  pool: Pool;
  lastUsed: number;
}

const POOL_IDLE_MS = 60_000;

/**
 * Sends one attempt: checks the address (resolving the name), signs, POSTs to
 * the checked address, reads a capped part of the response, classifies.
 *
 * Pinning: one undici Pool per (origin, checked address) whose connector dials
 * that IP while TLS keeps the URL's host name for SNI and certificate checks,
 * so undici never resolves the name itself. Redirects are not followed (undici
 * only follows them with the redirect interceptor, which is not installed).
 */
export class Sender {
  private readonly pools = new Map<string, PoolEntry>();
  private readonly lookups = new Map<string, Promise<string[]>>();
  private readonly policy: AddressPolicy;
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly opts: SenderOptions) {
    // Concurrent attempts to one host share the resolution in flight.
    const resolve: Resolver = (host) => {
      let p = this.lookups.get(host);
      if (!p) {
        p = opts.policy.resolve(host).finally(() => this.lookups.delete(host));
        this.lookups.set(host, p);
      }
      return p;
    };
    this.policy = { allowHosts: opts.policy.allowHosts, resolve };
    this.sweeper = setInterval(() => this.closeIdlePools(), POOL_IDLE_MS / 2);
    this.sweeper.unref();
  }

  async send(input: AttemptInput): Promise<AttemptOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const ac = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort();
    }, this.opts.timeoutMs);
    let address: string | null = null;
    let statusCode: number | null = null;
    try {
      const target = await untilAborted(checkWebhookUrl(input.url, this.policy), ac.signal);
      address = target.pinned;
      const body = eventBody(input.event);
      // during a rotation both secrets sign: `t=..,v1=<new>,v1=<old>` (as Stripe does); receivers accept either
      const t = Math.floor(input.at.getTime() / 1000);
      const signature = activeSecrets(input.secret, input.at)
        .map((secret, i) => (i === 0 ? signatureHeader(secret, t, body) : signatureHeader(secret, t, body).slice(`t=${t}`.length)))
        .join('');
      const res = await this.poolFor(target).request({
        path: `${target.url.pathname}${target.url.search}`,
        method: 'POST',
        headers: deliveryHeaders(input.event, signature),
        body,
        signal: ac.signal,
      });
      statusCode = res.statusCode;
      await readCapped(res.body, MAX_RESPONSE_BYTES);
      const delivered = statusCode >= 200 && statusCode < 300;
      return { delivered, statusCode, error: null, durationMs: elapsed(), address };
    } catch (err) {
      const error = timedOut ? 'timeout' : err instanceof AddressRejected ? `address_rejected: ${err.message}` : describeError(err);
      return { delivered: false, statusCode, error, durationMs: elapsed(), address };
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((p) => p.pool.destroy().catch(() => {})));
  }

  private poolFor(target: CheckedTarget): Pool {
    const key = `${target.url.origin}#${target.pinned}`;
    let entry = this.pools.get(key);
    if (!entry) {
      // undici's own timers are only a backstop (and inactivity timers at that):
      // the total limit is the AbortController in send(), so they are set beyond it.
      const backstop = this.opts.timeoutMs * 2;
      const connector = buildConnector({ timeout: backstop, ...(this.opts.ca ? { ca: this.opts.ca } : {}) });
      const pinned = target.pinned;
      const servername = target.literal ? undefined : target.host;
      entry = {
        pool: new Pool(target.url.origin, {
          connections: this.opts.connections,
          pipelining: 1,
          headersTimeout: backstop,
          bodyTimeout: backstop,
          connect: (o, cb) => connector({ ...o, hostname: pinned, servername }, cb),
        }),
        lastUsed: 0,
      };
      this.pools.set(key, entry);
    }
    entry.lastUsed = Date.now();
    return entry.pool;
  }

  /** A pool outlives any attempt on it (attempts last at most timeoutMs < POOL_IDLE_MS). */
  private closeIdlePools(): void {
    const cutoff = Date.now() - POOL_IDLE_MS;
    for (const [key, entry] of this.pools) {
      if (entry.lastUsed < cutoff) {
        this.pools.delete(key);
        entry.pool.close().catch(() => {});
      }
    }
  }
}

/** Reads at most `cap` bytes of a response body, then drops the rest (and the connection). */
async function readCapped(body: AsyncIterable<Buffer> & { destroy(): unknown }, cap: number): Promise<void> {
  let seen = 0;
  for await (const chunk of body) {
    seen += chunk.length;
    if (seen >= cap) {
      body.destroy();
      return;
    }
  }
}

function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error('aborted'));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** A short reason for the delivery log; never the request, headers or secret. */
export function describeError(err: unknown): string {
  const e = err as { code?: string; name?: string; message?: string; cause?: { code?: string } };
  const code = e?.code ?? e?.cause?.code;
  if (code === 'ECONNREFUSED') return 'connection_refused';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE') return 'connection_reset';
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') return 'timeout';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'unreachable';
  // Node's own TLS codes and OpenSSL's verification codes (UNABLE_TO_VERIFY_LEAF_SIGNATURE, CERT_HAS_EXPIRED, ...)
  if (code && /CERT|SSL|TLS|^UNABLE_TO_|SIGNATURE|_CA_|_CRL_/.test(code)) return `tls_error: ${code}`;
  return `error: ${code ?? e?.name ?? 'unknown'}${e?.message ? ` ${e.message}` : ''}`.slice(0, 200);
}
