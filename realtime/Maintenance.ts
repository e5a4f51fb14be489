import type { Logger } from '../src/logger.js';
import { FLUSH_BATCH, type Meter } from './metering/Meter.js';
import type { MeterLedger } from './metering/MeterLedger.js';
import type { Change, Presence, PublicPerson } from './presence/Presence.js';
import type { gatewayTiming } from './timing.js';

/** What the periodic work needs of the gateway: its lessons as ids, and the few actions that follow. */
export interface MaintainedGateway {
  readonly nodeId: string;
  readonly log: Logger;
  readonly timing: ReturnType<typeof gatewayTiming>;
  now(): number;
  /** lessons open on this node */
  openLessons(): string[];
  /** lessons with someone present on this node */
  servedLessons(): string[];
  /** presence of this node's sockets in the lesson is certain up to here (<= now) */
  certainUntil(lessonId: string, now: number): number;
  /** registers this node's live sockets again (all lessons, or these) */
  reRegister(onlyLessons?: string[]): Promise<void>;
  /** departures Redis missed */
  readonly pendingDepartures: number;
  retryPendingLeaves(): Promise<void>;
  applyDeparture(lessonId: string, left: PublicPerson[], change: Change, at: number): void;
  archived(lessonId: string): Promise<void>;
}

type MeterPort = Pick<Meter, 'apply' | 'flush' | 'finishEnd' | 'endUnknown' | 'remember' | 'startsPending' | 'startSettled' | 'retryStart'>;

type Job = 'heartbeat' | 'flush' | 'sweep';


/**
 * The periodic work of a gateway node. Every rule here reads its time from
 * deps.clock; the intervals only decide how soon a rule is noticed.
 *
 * - heartbeat (every lease/3): refresh this node's lease; re-register live
 *   connections when Redis lost them; retry departures Redis missed; reap
 *   nodes whose lease expired (their people stop counting, once).
 * - flush (GATEWAY_METER_FLUSH_SECONDS): for lessons served here, say how far
 *   this node vouches for its sockets' presence (metering/Certainty.ts), claim
 *   the periodic charge (one node per lesson and interval) and settle meters.
 * - sweep: end sessions idle for SESSION_IDLE_SECONDS, sessions of archived
 *   lessons, and orphans nobody vouched for; every node sweeps, the Lua
 *   claims and idempotent Postgres writes make duplicates harmless. It first
 *   re-registers this node's sockets if Redis lost them, so no lesson with
 *   people here is judged empty.
 */
export class Maintenance {
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly busy = new Set<Job>();

  constructor(
    private readonly gw: MaintainedGateway,
    private readonly presence: Presence,
    private readonly meter: MeterPort,
    /** what the sweeps read (idle, orphan and archived sessions) */
    private readonly ledger: Pick<MeterLedger, 'idleSessions' | 'orphanSessions' | 'archivedRunning' | 'archivedAmong'>,
  ) {}

  start(): void {
    const t = this.gw.timing;
    const every = (job: Job, ms: number, fn: () => Promise<void>) => {
      const timer = setInterval(() => void this.guard(job, fn), ms);
      timer.unref();
      this.timers.push(timer);
    };
    every('heartbeat', t.heartbeatMs, () => this.heartbeat());
    every('flush', t.flushMs, () => this.flush());
    // jitter so that nodes started together do not sweep in lockstep
    every('sweep', t.sweepMs + Math.floor(Math.random() * 200), () => this.sweep());
  }

  stop(): void {
    for (const t of this.timers.splice(0)) clearInterval(t);
  }

  /** Runs one job unless the previous run of it is still going; errors are logged, never thrown. */
  async guard(job: Job, fn: () => Promise<void>): Promise<void> {
    if (this.busy.has(job)) return;
    this.busy.add(job);
    try {
      await fn();
    } catch (err) {
      this.gw.log.warn({ err: (err as Error).message, job }, 'maintenance job failed');
    } finally {
      this.busy.delete(job);
    }
  }

  async heartbeat(): Promise<void> {
    const { gw, presence } = this;
    const now = gw.now();
    const { alive, expired } = await presence.heartbeat(gw.nodeId, now);
    if (!alive) await gw.reRegister();
    if (gw.pendingDepartures > 0) await gw.retryPendingLeaves();
    for (const dead of expired) {
      const lessons = await presence.reap(dead, now);
      if (lessons.length > 0) gw.log.warn({ dead_node: dead, lessons: lessons.length }, 'reaped a node whose lease expired');
      for (const l of lessons) gw.applyDeparture(l.lessonId, l.left, l, now);
    }
  }

  async flush(): Promise<void> {
    const { gw, presence, meter } = this;
    const now = gw.now();
    let ids = gw.servedLessons();
    const served = new Set(ids);
    // read once (it asks Redis): the archive handling below adds none but lessons served here
    const unstarted = (await meter.startsPending()).filter((id) => !served.has(id));
    // Never charge past a deletion whose notification we missed: those lessons end instead.
    const archived = await this.ledger.archivedAmong(unstarted.length > 0 ? [...ids, ...unstarted] : ids);
    for (const lessonId of archived.keys()) await gw.archived(lessonId);
    if (archived.size > 0) ids = ids.filter((id) => !archived.has(id));
    // Pending starts some node failed to write, of lessons nobody here serves (Meter.unstarted and
    // Redis's list): the tick retries each (startRetryMs after its last try) until its meter is no
    // longer `starting`. No vouch: this node has no sockets there.
    if (unstarted.length > 0) {
      for (const r of await presence.tick(unstarted, now)) {
        if (r.meter?.state !== 'starting') meter.startSettled(r.lessonId);
        else if (r.effects.length > 0) void meter.apply(r.lessonId, r, now);
      }
    }
    const lost: string[] = [];
    // A chunk at a time, ticked then charged: what a chunk allocates dies young instead of living
    // through the whole flush (a node of thousands of running lessons promoted megabytes per flush
    // to the old generation, a full collection every flush). Presence cuts a chunk into script
    // calls of its own size (RedisPresence.tick).
    for (let i = 0; i < ids.length; i += FLUSH_BATCH) {
      const chunk = ids.slice(i, i + FLUSH_BATCH);
      const results = await presence.tick(chunk, now, { node: gw.nodeId, until: chunk.map((id) => gw.certainUntil(id, now)) });
      for (const r of results) {
        if (r.meter === null) lost.push(r.lessonId);
        else if (r.effects.length > 0) void meter.apply(r.lessonId, r, now);
      }
      await meter.flush(results, now);
    }
    // Redis has no meter for lessons we serve: it lost its state.
    if (lost.length > 0) await gw.reRegister(lost);
  }

  async sweep(): Promise<void> {
    const { gw, presence, meter, ledger } = this;
    const now = gw.now();
    // Redis may have lost its state since the last heartbeat: this node's live sockets go
    // back in before any rule below looks at who is present (an "empty" lesson, an orphan).
    const { alive } = await presence.heartbeat(gw.nodeId, now);
    if (!alive) await gw.reRegister();
    for (const c of await ledger.idleSessions(new Date(now - gw.timing.idleMs))) {
      const r = await presence.claimEnd(c.lessonId, c.sessionId, now);
      if (r.kind === 'end') await meter.finishEnd(c.lessonId, r.meter, now);
      else if (r.kind === 'orphan') await meter.endUnknown(c.lessonId, c.sessionId, c.since, now);
    }
    for (const c of await ledger.archivedRunning()) {
      const m = await presence.archiveEnd(c.lessonId, c.since.getTime(), now);
      if (m?.pendingEnd) await meter.finishEnd(c.lessonId, m, now);
      // a start of Redis's pending since before the deletion: made (adopting this session), then ended here again
      else if (m?.state === 'starting') meter.retryStart(c.lessonId, now);
      else await meter.endUnknown(c.lessonId, c.sessionId, c.since, now);
    }
    for (const c of await ledger.orphanSessions(new Date(now - gw.timing.orphanMs))) {
      const m = await presence.orphan(c.lessonId, c.sessionId, now);
      if (m) await meter.remember(c.lessonId, m, 0, now);
    }
    // Archive notifications can be missed (LISTEN reconnecting): check the lessons served here.
    const archived = await ledger.archivedAmong(gw.openLessons());
    for (const lessonId of archived.keys()) await gw.archived(lessonId);
  }
}
