import { causedByInput, writeSplitting } from '../db/errors.js';
import postgres from 'postgres';
import type { Deps } from '../deps.js';
import type { Logger } from '../logger.js';
import { EVENTS_CHANNEL } from '../db/channels.js';
import { DISPATCHER_LOCK_CLASS } from '../db/locks.js';
import { RECONNECT_BACKOFF_MAX_S, reconnectBackoff } from '../db/index.js';
import { retryWhileConnectionLost } from '../db/errors.js';
import { listenSurely } from '../db/listen.js';
import type { DeliveryResult, DispatcherMetrics } from '../metrics/dispatcher.js';
import { claimDue, nextState, recordResults, type AttemptResult, type ClaimedDelivery } from './queue.js';
import { webhookRuntime, type WebhookRuntime } from './runtime.js';
import { Sender } from './sender.js';

/** Most rows claimed by one query, and most results written by one query. */
const CLAIM_BATCH = 200;
const FLUSH_BATCH = 500;
/** A claim older than the attempt time-out plus this is taken over even from a live dispatcher. */
const LEASE_MARGIN_MS = 60_000;
const HEARTBEAT_MS = 5_000;

/**
 * One webhook dispatcher. Postgres drives everything: LISTEN wakes it when an
 * event commits, a poll every WEBHOOK_POLL_MS is the backstop (and finds
 * retries that came due), claims are batched, results are batched.
 *
 * Liveness: at start the dispatcher takes a number and holds the session
 * advisory lock (DISPATCHER_LOCK_CLASS, number) on a connection of its own.
 * Rows it claims carry that number; when the process dies its connection closes,
 * the lock goes, and any dispatcher's next claim takes the rows over (once the
 * attempt they were in has surely ended) and retries the attempt.
 * If only the lock's connection is lost, the dispatcher stops claiming until it
 * holds the lock again (taken again at once, then with backoff); what it has in
 * flight it finishes and records.
 */
export class Dispatcher {
  private number = 0;
  private lockSql!: postgres.Sql;
  private readonly sender: Sender;
  private readonly log: Logger;
  private readonly runtime: WebhookRuntime;
  private unlisten: (() => Promise<void>) | undefined;
  private timers: NodeJS.Timeout[] = [];

  private inFlight = 0;
  private readonly perPartner = new Map<string, number>();
  private readonly sends = new Set<Promise<void>>();
  /** claimed here and not yet recorded: sending, or the result waiting to be written */
  private readonly held = new Set<number>();
  private pumping = false;
  private pumpAgain = false;
  private results: AttemptResult[] = [];
  private flushing: Promise<void> | null = null;
  private flushQueued = false;
  private closed = false;
  /** whether this process believes it holds its liveness lock; claims are skipped while not (the claim re-checks in SQL) */
  private lockHeld = false;
  private relocking: Promise<void> | null = null;
  /** the claim loop now running, awaited by close() so nothing it claims goes unsent */
  private pumped: Promise<void> | null = null;

  constructor(
    private readonly deps: Deps,
    private readonly metrics?: DispatcherMetrics,
  ) {
    this.log = deps.log.child({ component: 'dispatcher' });
    this.runtime = webhookRuntime(deps);
    this.sender = new Sender({
      policy: this.runtime.policy,
      timeoutMs: deps.config.WEBHOOK_TIMEOUT_MS,
      connections: deps.config.WEBHOOK_CONCURRENCY,
      ca: this.runtime.ca,
    });
  }

  /** This dispatcher's number (in the delivery log's `dispatcher` column). */
  get id(): number {
    return this.number;
  }

  async start(): Promise<void> {
    const { config } = this.deps;
    if (config.WEBHOOK_ALLOW_HOSTS.length > 0) {
      this.log.warn({ hosts: config.WEBHOOK_ALLOW_HOSTS }, 'WEBHOOK_ALLOW_HOSTS is set: these hosts skip the https and public-address rules (development and tests only)');
    }
    // Its own connection, never idle-closed or recycled: losing it would drop the lock.
    this.lockSql = postgres(config.DATABASE_URL, {
      max: 1,
      idle_timeout: 0,
      max_lifetime: 0,
      onnotice: () => {},
      connection: { application_name: 'lessons-dispatcher-lock' },
      backoff: reconnectBackoff,
      onclose: () => this.lockLost(),
    });
    // A connection lost while starting is retried (a new number is only a gap in the sequence).
    await retryWhileConnectionLost(
      async () => {
        const [row] = await this.lockSql<{ n: number }[]>`SELECT nextval('webhook_dispatcher_seq')::integer AS n`;
        this.number = row.n;
        await this.lockSql`SELECT pg_advisory_lock(${DISPATCHER_LOCK_CLASS}, ${this.number})`;
      },
      { what: 'dispatcher liveness lock', log: this.log },
    );
    this.lockHeld = true;

    const listener = await listenSurely(this.deps.sql, EVENTS_CHANNEL, () => this.wake(), () => this.wake(), this.log);
    this.unlisten = listener.unlisten;
    this.timers.push(setInterval(() => this.wake(), config.WEBHOOK_POLL_MS));
    this.timers.push(setInterval(() => void this.heartbeat(), HEARTBEAT_MS));
    this.log.info({ dispatcher: this.number }, 'dispatcher started');
    this.wake();
  }

  /** Looks for due deliveries now (also called by tests after moving a ManualClock). */
  wake(): void {
    if (this.closed) return;
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumped = this.pump();
  }

  /**
   * Stops claiming, lets attempts in flight finish (each is bounded by the time-out), writes their
   * results. A claim already running when close() is called is waited for and what it took is sent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    if (this.sends.size > 0) this.log.info({ dispatcher: this.number, inFlight: this.sends.size }, 'stopping: finishing deliveries in flight');
    await this.unlisten?.().catch(() => {});
    await this.pumped;
    while (this.sends.size > 0) await Promise.allSettled([...this.sends]);
    for (let i = 0; i < 5 && (this.results.length > 0 || this.flushing); i++) {
      await (this.flushing ?? this.flush());
    }
    await this.sender.close();
    await this.lockSql.end({ timeout: 5 }).catch(() => {});
    this.log.info({ dispatcher: this.number }, 'dispatcher stopped');
  }

  private async pump(): Promise<void> {
    if (!this.lockHeld) return; // relock() wakes us
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        const free = this.deps.config.WEBHOOK_CONCURRENCY - this.inFlight;
        if (free <= 0) break; // a finishing send wakes us
        const limit = Math.min(free, CLAIM_BATCH);
        const max = this.deps.config.WEBHOOK_PARTNER_CONCURRENCY;
        const busy = [...this.perPartner].map(([partner_id, n]) => ({ partner_id, free: Math.max(0, max - n) }));
        // A claim needs no fsync before the send: if Postgres crashes, every
        // dispatcher's liveness lock goes with it and claims are re-taken anyway.
        const claimed = await this.deps.sql.begin(async (tx) => {
          await tx`SET LOCAL synchronous_commit = off`;
          return claimDue(tx, {
            dispatcher: this.number,
            now: this.deps.clock.now(),
            limit,
            perPartner: max,
            busy,
            leaseMs: this.deps.config.WEBHOOK_TIMEOUT_MS + LEASE_MARGIN_MS,
            takeoverMs: this.deps.config.WEBHOOK_TIMEOUT_MS,
            held: [...this.held],
          });
        });
        for (const d of claimed) this.startSend(d);
        if (claimed.length === limit) this.pumpAgain = true;
      } while (this.pumpAgain && !this.closed);
    } catch (err) {
      // Postgres unreachable: the poll tries again.
      this.log.error({ err: errText(err) }, 'claiming deliveries failed');
    } finally {
      this.pumping = false;
    }
  }

  private startSend(d: ClaimedDelivery): void {
    this.held.add(d.event_id);
    this.inFlight++;
    this.perPartner.set(d.partner_id, (this.perPartner.get(d.partner_id) ?? 0) + 1);
    const p = this.send(d).finally(() => {
      this.inFlight--;
      const n = (this.perPartner.get(d.partner_id) ?? 1) - 1;
      if (n <= 0) this.perPartner.delete(d.partner_id);
      else this.perPartner.set(d.partner_id, n);
      this.sends.delete(p);
      // A slot is free: claim again. While a claim runs this only sets a flag,
      // so under load claims run back to back, each taking what has freed up.
      this.wake();
    });
    this.sends.add(p);
  }

  private async send(d: ClaimedDelivery): Promise<void> {
    const attempt = d.attempts + 1;
    const at = this.deps.clock.now();
    // Every line about this attempt names it: the event (also the X-Whiteboard-Delivery id the
    // partner sees), its round and attempt number, and the partner (never the URL's secret parts).
    const log = this.log.child({ event_id: d.event_id, delivery: String(d.event_id), round: d.round, attempt, partner_id: d.partner_id });
    const started = performance.now();
    let result: AttemptResult;
    let outcome: DeliveryResult;
    try {
      const secret = this.runtime.secrets.open(d.secret, d.partner_id);
      const out = await this.sender.send({ url: d.url, secret, at, event: { id: d.event_id, type: d.type, created_at: d.created_at, data: d.data } });
      const finished = this.deps.clock.now();
      result = {
        event_id: d.event_id,
        partner_id: d.partner_id,
        round: d.round,
        attempt,
        url: d.url,
        address: out.address,
        attempted_at: at.toISOString(),
        duration_ms: out.durationMs,
        status_code: out.statusCode,
        error: out.error,
        delivered: out.delivered,
        ...nextState(out.delivered, attempt, finished, this.deps.config.WEBHOOK_RETRY_SCHEDULE),
      };
      outcome = out.delivered ? 'delivered' : out.statusCode !== null ? 'http_error' : 'network_error';
      if (!out.delivered) log.debug({ status: out.statusCode, error: out.error, next: result.next_attempt_at }, 'delivery attempt failed');
      else log.debug({ status: out.statusCode, ms: out.durationMs }, 'delivered');
    } catch (err) {
      // Only a secret that cannot be opened gets here (e.g. its key was removed): a failed attempt.
      log.error({ err: errText(err) }, 'delivery attempt could not be made');
      outcome = 'internal_error';
      result = {
        event_id: d.event_id,
        partner_id: d.partner_id,
        round: d.round,
        attempt,
        url: d.url,
        address: null,
        attempted_at: at.toISOString(),
        duration_ms: 0,
        status_code: null,
        error: 'internal_error',
        delivered: false,
        ...nextState(false, attempt, this.deps.clock.now(), this.deps.config.WEBHOOK_RETRY_SCHEDULE),
      };
    }
    if (this.metrics) {
      this.metrics.attempt(outcome, (performance.now() - started) / 1000);
      if (result.state !== 'pending') this.metrics.finished(result.delivered, attempt);
    }
    this.results.push(result);
    this.queueFlush();
  }

  /** Results are written together: everything that finished while the previous write ran. */
  private queueFlush(): void {
    if (this.flushQueued || this.flushing) return;
    this.flushQueued = true;
    setImmediate(() => {
      this.flushQueued = false;
      void this.flush();
    });
  }

  private flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    const batch = this.results.splice(0, FLUSH_BATCH);
    if (batch.length === 0) return Promise.resolve();
    this.flushing = (async () => {
      let retry = false;
      try {
        // one partner's result that Postgres refuses for good (bad data) is left out alone, logged with
        // its event; the other results are written
        await writeSplitting(
          batch,
          async (group) => {
            await recordResults(this.deps.sql, this.number, group);
            for (const r of group) this.held.delete(r.event_id);
          },
          (group, err) => {
            if (!causedByInput(err)) {
              // Keep them; the claims stay ours meanwhile, so nobody sends these again.
              this.results.unshift(...group);
              retry = true;
              this.log.error({ err: errText(err), results: group.length }, 'writing delivery results failed; retrying');
              return;
            }
            // kept claimed (held) and not retried: taken back, it would be sent again and fail again, for ever
            this.log.error({ err: errText(err), event_id: group[0].event_id }, 'writing a delivery result failed for good; the delivery stays claimed by this dispatcher');
          },
        );
        if (retry) await new Promise((r) => setTimeout(r, 1000));
      } finally {
        this.flushing = null;
      }
      if (this.results.length > 0) this.queueFlush();
      this.wake(); // capacity was freed and claims released
    })();
    return this.flushing;
  }

  /** The lock's connection closed (reset, backend terminated, Postgres restart): the lock went with it. */
  private lockLost(): void {
    if (this.closed || !this.lockHeld) return;
    this.lockHeld = false;
    this.log.warn({ dispatcher: this.number }, 'liveness lock lost with its connection; claiming paused until it is taken again');
    void this.relock();
  }

  /**
   * Takes the lock again on a new connection: at once, then with backoff while Postgres is unreachable,
   * at most as long between tries as the pools wait between reconnects (RECONNECT_BACKOFF_MAX_S), so
   * claims resume within about that long of Postgres answering again.
   */
  private relock(): Promise<void> {
    this.relocking ??= (async () => {
      for (let delay = 100; !this.closed && !this.lockHeld; delay = Math.min(delay * 2, RECONNECT_BACKOFF_MAX_S * 1000)) {
        try {
          await this.lockSql`SELECT pg_advisory_lock(${DISPATCHER_LOCK_CLASS}, ${this.number})`;
          this.lockHeld = true;
          this.log.info({ dispatcher: this.number }, 'liveness lock taken again');
        } catch (err) {
          this.log.warn({ err: errText(err) }, 'taking the liveness lock again failed; retrying');
          await new Promise((r) => setTimeout(r, delay));
        }
      }
      this.relocking = null;
      this.wake();
    })();
    return this.relocking;
  }

  /** Backstop for a lost lock that no close event reported: checks it is held, re-takes it if not. */
  private async heartbeat(): Promise<void> {
    if (!this.lockHeld) return;
    try {
      const [row] = await this.lockSql<{ held: boolean; taken: boolean }[]>`
        SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'
                         AND classid = ${DISPATCHER_LOCK_CLASS}::bigint::oid AND objid = ${this.number}::bigint::oid AND objsubid = 2) AS held`;
      if (!row.held) {
        this.lockHeld = false;
        this.log.warn({ dispatcher: this.number }, 'liveness lock was not held; taking it again');
        await this.relock();
      }
    } catch (err) {
      this.log.error({ err: errText(err) }, 'dispatcher heartbeat failed');
    }
  }
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
