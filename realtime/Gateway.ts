import { performance } from 'node:perf_hooks';
import type { Deps } from '../src/deps.js';
import type { ResolvedLink } from '../src/domain/links.js';
import type { Logger } from '../src/logger.js';
import type { GatewayMetrics } from '../src/metrics/gateway.js';
import type { MeterSeed } from '../src/metering/meters.js';
import type { GatewayListener, GatewayParts } from './parts.js';
import type { Admission } from './admission/Admission.js';
import type { PersonRates } from './admission/PersonRates.js';
import { personIdOf } from './admission/personId.js';
import type { Bus } from './bus/Bus.js';
import type { Envelope, Outgoing } from './bus/LessonBus.js';
import { ClientConnection, SETTLED, type ConnectionLimits, type SocketLike } from './ClientConnection.js';
import type { FeatureContext, GatewayApi, GatewayFeature, MessageContext } from './features/api.js';
import { frameEnvelope, Lesson, type CountOut, type Fanout, type LocalPerson, type PersonLimits } from './lesson/Lesson.js';
import { Maintenance, type MaintainedGateway } from './Maintenance.js';
import { Drain, DRAIN_LEAVE_GRACE_MS, sleep, type DrainedGateway } from './Drain.js';
import { ReRegistration, type RegisteringGateway } from './presence/ReRegistration.js';
import { archiveLesson } from './ArchiveListener.js';
import { gatewayTiming } from './timing.js';
import type { PresenceLog } from './metering/PresenceLog.js';
import { withTimeout } from '../src/lib/timeout.js';
import type { JoinAnnouncer } from './metering/JoinAnnouncer.js';
import type { Meter } from './metering/Meter.js';
import type { MeterLedger } from './metering/MeterLedger.js';
import { Certainty } from './metering/Certainty.js';
import type { Change, Presence, PublicPerson } from './presence/Presence.js';
import type { CloseCodeName } from './protocol/closeCodes.js';
import { coreMessages } from './protocol/messages/index.js';
import { MessageRegistry } from './protocol/registry.js';
import { presenceFrame } from './protocol/serverMessages.js';
import { welcomeFrame } from './protocol/welcome.js';

/** What the gateway reports when METRICS_PORT is off: nothing, at no cost. */
const noMetrics: GatewayMetrics = {
  setSource() {},
  joined() {},
  messageIn() {},
  messageOut() {},
  fanOut() {},
  closed() {},
  meterFlushed() {},
  call() {},
  upgradeRefused() {},
  connectionCap() {},
  boardCommitFailed() {},
  writeRefused() {},
};

/** A connection whose departure presence has not heard yet (Redis was unreachable), retried by Maintenance. */
interface PendingLeave {
  conn: ClientConnection;
  at: number;
}

/**
 * The gateway's core, independent of the socket library: admits
 * connections, registers people in Presence, sends `welcome`, dispatches
 * messages through the registry, keeps one Lesson object per lesson with
 * sockets here (its sockets, its bus channel, its features' state), and
 * hands meter transitions to the Meter. It owns its start, its timers
 * (Maintenance) and its close. server.ts glues uWS to it; a unit test drives
 * it with plain SocketLike objects.
 */
export class Gateway implements GatewayApi, MaintainedGateway, DrainedGateway, RegisteringGateway {
  readonly nodeId: string;
  readonly registry = new MessageRegistry<MessageContext>();
  readonly presence: Presence;
  readonly meter: Meter;
  readonly ledger: MeterLedger;
  readonly admission: Admission;
  private readonly personRates: PersonRates;
  readonly bus: Bus;
  readonly timing: ReturnType<typeof gatewayTiming>;
  readonly log: Logger;
  readonly metrics: GatewayMetrics;
  private readonly lessonsById = new Map<string, Lesson>();
  /** departures Redis did not hear (it was unreachable), retried by Maintenance */
  private readonly pendingLeaves: PendingLeave[] = [];
  /** how far this node vouches for its sockets' presence, per lesson (what a flush may charge) */
  private readonly certainty: Certainty;
  private readonly features: GatewayFeature[];
  private readonly busHandlers = new Map<string, (lesson: Lesson, e: Envelope) => void>();
  private readonly announcer: JoinAnnouncer;
  /** arrivals and departures of people, for attendance */
  readonly presenceLog: PresenceLog;
  private readonly loadSeed: ((lessonId: string) => Promise<MeterSeed | undefined>) | undefined;
  readonly maintenance: Maintenance;
  private fanout: Fanout | undefined;
  private connSeq = 0;
  /** sockets open here (the connections gauge) */
  private connCount = 0;
  private readonly countOut: (type: string, n: number) => void;
  /** joins, departures and feature hooks in flight: idle() waits for them */
  private readonly tasks = new Set<Promise<unknown>>();
  private readonly reRegistration = new ReRegistration(this);
  private readonly drainer = new Drain(this);
  private readonly listeners: GatewayListener[];
  private readonly unlisteners: (() => Promise<void>)[] = [];
  private readonly warmUpParts: (() => Promise<unknown>) | undefined;
  private closing: Promise<void> | undefined;
  /** every connection's message rate limit: one object for all of them */
  private readonly connLimits: ConnectionLimits;
  /** what every Lesson is given: one object and one closure each for all of them (memory per lesson) */
  private readonly lessonShared: {
    limits: PersonLimits;
    now: () => number;
    onFeatureEnvelope: (lesson: Lesson, e: Envelope) => void;
    countOut: CountOut | undefined;
  };

  constructor(
    readonly deps: Deps,
    parts: GatewayParts,
  ) {
    this.nodeId = parts.nodeId;
    this.log = deps.log.child({ component: 'gateway', node: this.nodeId });
    this.timing = gatewayTiming(deps.config);
    this.connLimits = { messagesPerSecond: deps.config.GATEWAY_MESSAGES_PER_SECOND, burst: deps.config.GATEWAY_MESSAGE_BURST };
    this.certainty = new Certainty(this.timing.keepaliveCycleMs);
    this.features = parts.features;
    this.presence = parts.presence;
    this.loadSeed = parts.loadSeed;
    this.meter = parts.meter;
    this.meter.marksOf = (lessonId) => {
      const lesson = this.lessonsById.get(lessonId);
      return lesson && (lesson.meterMarks ??= {});
    };
    this.ledger = parts.ledger;
    this.listeners = parts.listeners;
    this.warmUpParts = parts.warmUp;
    this.admission = parts.admission;
    this.personRates = parts.personRates;
    this.presenceLog = parts.presenceLog;
    this.announcer = parts.announcer;
    this.bus = parts.bus;
    this.bus.receiver = (lessonId, e) => this.lessonsById.get(lessonId)?.receive(e);
    this.metrics = parts.metrics ?? noMetrics;
    const metrics = this.metrics;
    this.countOut = (type, n) => metrics.messageOut(type, n);
    // a row of one lesson that Postgres refuses for good is left out of its batch, logged with the lesson, and counted here
    this.announcer.onRefused = () => metrics.writeRefused('participant.joined');
    this.presenceLog.onRefused = () => metrics.writeRefused('presence marks');
    this.meter.onRefused = (what) => metrics.writeRefused(what);
    metrics.setSource({ connections: () => this.connCount, lessonsOpen: () => this.lessonsById.size, sessionsRunning: () => this.sessionsRunning() });
    const c = deps.config;
    this.lessonShared = {
      limits: { maxSockets: c.GATEWAY_MAX_SOCKETS_PER_PERSON, cursorRate: c.GATEWAY_PERSON_CURSORS_PER_SECOND, cursorBurst: c.GATEWAY_PERSON_CURSOR_BURST },
      now: () => this.now(),
      onFeatureEnvelope: (lesson, e) => this.busHandlers.get(e.kind)?.(lesson, e),
      countOut: this.metrics === noMetrics ? undefined : this.countOut,
    };
    this.maintenance = new Maintenance(this, this.presence, this.meteredFlush(), parts.ledger);
    this.registry.register(...coreMessages);
    for (const f of this.features) {
      if (f.messages) this.registry.register(...f.messages);
      for (const [kind, handle] of Object.entries(f.onBus ?? {})) this.busHandlers.set(kind, handle);
    }
    for (const f of this.features) f.attach?.(this);
  }

  /** The transport's delivery to lesson topics (uWS); lessons loop over their sockets without it. */
  useFanout(fanout: Fanout): void {
    this.fanout = fanout;
  }

  featureList(): readonly GatewayFeature[] {
    return this.features;
  }

  // ---- transport callbacks -------------------------------------------------

  /** sockets opened on this node since it started (the join rate realtime/memory.ts follows) */
  get arrivals(): number {
    return this.connSeq;
  }

  /** A socket finished its upgrade with an admitted link. */
  open(socket: SocketLike, link: ResolvedLink, ip: string, upgradeAt = performance.now()): ClientConnection {
    const now = this.now();
    const conn = new ClientConnection(
      `${this.nodeId}#${++this.connSeq}`,
      socket,
      link,
      { id: personIdOf(link), name: link.name, role: link.role },
      ip,
      this.connLimits,
      now,
      upgradeAt,
    );
    this.connCount++;
    const fresh = !this.lessonsById.has(link.lesson_id);
    const lesson = this.lessonFor(link.lesson_id);
    // past the cap the person's oldest sockets go (4409): a new tab wins over a forgotten one
    for (const old of lesson.add(conn, now)) old.close('replaced');
    conn.joined = this.track(this.admit(conn, lesson, fresh));
    return conn;
  }

  /** join(), its failure closing the socket; settled, the connection keeps the one shared settled promise instead of its own (memory per held connection). */
  private async admit(conn: ClientConnection, lesson: Lesson, fresh: boolean): Promise<void> {
    try {
      await this.join(conn, lesson, fresh);
    } catch (err) {
      this.log.error({ err, conn: conn.id, lesson_id: conn.lessonId }, 'join failed');
      conn.close('internal');
    } finally {
      // after open() stored this call's promise: the await above always suspends first
      conn.joined = SETTLED;
    }
  }

  message(conn: ClientConnection, data: ArrayBuffer | string, isBinary: boolean): void {
    const now = this.now();
    conn.lastSeenAt = now;
    const size = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
    if (size > this.deps.config.GATEWAY_MAX_PAYLOAD_BYTES) {
      conn.close('payloadTooLarge');
      return;
    }
    if (conn.state !== 'present') {
      if (conn.state === 'admitting') conn.sendError('not_ready', 'wait for welcome before sending');
      return;
    }
    if (!conn.admitFrame(now)) return;
    if (isBinary) {
      conn.invalidFrame('binary_not_supported', 'messages are JSON text frames');
      return;
    }
    const parsed = this.registry.parse(typeof data === 'string' ? data : Buffer.from(data).toString('utf8'));
    if (!parsed.ok) {
      conn.invalidFrame(parsed.code, parsed.message, parsed.ref);
      return;
    }
    conn.validFrame();
    this.metrics.messageIn(parsed.def.type);
    const run = () => {
      try {
        const r = parsed.def.handle({ conn, gateway: this, now }, parsed.msg);
        if (r) r.catch((err) => this.handlerFailed(conn, parsed.def.type, err));
      } catch (err) {
        this.handlerFailed(conn, parsed.def.type, err);
      }
    };
    // chat lines and board operations are budgeted per person across nodes (admission/PersonRates.ts)
    if (this.personRates.gated(parsed.def.type)) this.personRates.admit(conn, parsed.def.type, parsed.msg, run);
    else run();
  }

  /** A pong: the client is alive (its last sign of life, for a departure noticed late). */
  pong(conn: ClientConnection): void {
    conn.lastSeenAt = this.now();
  }

  /**
   * The socket is gone (any reason). The departure is dated now, or, when the
   * transport noticed it `late` (a dead or half-open socket found by the idle
   * timeout), one keepalive cycle after the client's last sign of life (its last
   * frame or pong): a silent live socket answers a ping every cycle, so it was
   * possibly there until then and certainly gone after; dating it at the last
   * sign itself could bill less than the client was there (never allowed).
   */
  closed(conn: ClientConnection, late = false, code?: number): void {
    if (code !== undefined) this.metrics.closed(code);
    if (conn.state === 'closed') return;
    if (--this.connCount === 0) this.drainer.empty();
    const now = this.now();
    const at = late ? Math.min(now, conn.lastSeenAt + this.timing.keepaliveCycleMs) : now;
    conn.state = 'closed';
    this.certainty.departing(conn, at);
    const lesson = this.lessonsById.get(conn.lessonId);
    if (lesson?.remove(conn)) this.closeLesson(lesson);
    if (conn.drained) this.track(conn.joined.then(() => sleep(DRAIN_LEAVE_GRACE_MS)).then(() => this.leave(conn, at)));
    else this.track(conn.joined.then(() => this.leave(conn, at)));
  }

  // ---- GatewayApi ----------------------------------------------------------

  broadcast(lessonId: string, frame: string | object, opts: { except?: ClientConnection; exceptPerson?: string; ephemeral?: boolean } = {}): void {
    const text = typeof frame === 'string' ? frame : JSON.stringify(frame);
    const lesson = this.lessonsById.get(lessonId);
    if (lesson) {
      const t0 = performance.now();
      lesson.broadcast(text, opts);
      this.metrics.fanOut(performance.now() - t0);
    } else this.publishTo(lessonId, frameEnvelope(text, opts));
  }

  toPerson(lessonId: string, personId: string, frame: string): void {
    const lesson = this.lessonsById.get(lessonId);
    if (lesson) lesson.toPerson(personId, frame);
    else this.publishTo(lessonId, { kind: 'person', toPerson: personId, payload: frame });
  }

  closePerson(lessonId: string, personId: string, code: CloseCodeName): void {
    const lesson = this.lessonsById.get(lessonId);
    if (lesson) lesson.closePerson(personId, code);
    else this.publishTo(lessonId, { kind: 'close', toPerson: personId, payload: code });
  }

  publish(lessonId: string, kind: string, payload: string): void {
    const lesson = this.lessonsById.get(lessonId);
    if (lesson) lesson.publish({ kind, payload });
    else this.publishTo(lessonId, { kind, payload });
  }

  lesson(lessonId: string): Lesson | undefined {
    return this.lessonsById.get(lessonId);
  }

  localPerson(lessonId: string, personId: string): LocalPerson | undefined {
    return this.lessonsById.get(lessonId)?.person(personId);
  }

  localConnections(lessonId: string): ClientConnection[] {
    return this.lessonsById.get(lessonId)?.present() ?? [];
  }

  // ---- what Drain and ReRegistration use -----------------------------------

  connections(): ClientConnection[] {
    const out: ClientConnection[] = [];
    for (const lesson of this.lessonsById.values()) for (const conn of lesson.conns) out.push(conn);
    return out;
  }

  get connectionCount(): number {
    return this.connCount;
  }

  forgetUnrecorded(): Promise<void> {
    return this.announcer.forgetUnrecorded();
  }

  lessons(): Iterable<Lesson> {
    return this.lessonsById.values();
  }

  // ---- MaintainedGateway ---------------------------------------------------

  /** Lessons open on this node. */
  openLessons(): string[] {
    return [...this.lessonsById.keys()];
  }

  /** Lessons with someone present on this node (the ones this node meters). */
  servedLessons(): string[] {
    const out: string[] = [];
    for (const l of this.lessonsById.values()) if (l.hasPresent()) out.push(l.id);
    return out;
  }

  /** Presence of this node's sockets in the lesson is certain up to here (<= now): see Certainty. */
  certainUntil(lessonId: string, now: number): number {
    return this.certainty.until(lessonId, this.lessonsById.get(lessonId)?.conns ?? [], now);
  }

  // ---- presence ------------------------------------------------------------

  private async join(conn: ClientConnection, lesson: Lesson, freshLesson: boolean): Promise<void> {
    const t0 = performance.now();
    // A lesson new on this node is often new to Redis too (its first arrival):
    // read its meter seed from Postgres while the lesson opens (the bus
    // subscribes), instead of after Redis asks for it (two round
    // trips more before welcome). Used only if Redis has no meter for the
    // lesson, and then no node has written the lesson's meter since: a node
    // flushes a meter only while Redis holds it.
    const seedRead = freshLesson && this.loadSeed ? this.loadSeed(conn.lessonId).catch(() => undefined) : undefined;
    // Presence registers only once the lesson is open here (subscribed, the features' lesson state
    // set up; the board's feed does not hold this up, see BoardService.listen): registering while it
    // opens would save one Redis round trip per first arrival, but two arrivals whose lesson then
    // fails to open would start a session, end it at zero length and send lesson.started (tested in
    // gateway.unit.test.ts): no saved round trip is worth a session that never ran.
    try {
      await lesson.ready;
    } catch {
      // the bus or a feature's lesson state could not be set up (logged where it failed)
      conn.close('unavailable');
      return;
    }
    const tReady = performance.now();
    await this.beforePresence(conn);
    const seed = await seedRead;
    const t1 = performance.now();
    if (conn.state === 'closed') return;
    const now = this.now();
    // The features' welcome contributions (chat history, media states, ICE servers) are read while
    // presence registers, not before it: issued in the same tick as the join, their commands go to
    // Redis in the join's write (auto-pipelining) and come back in its round trip. They cannot refuse
    // the arrival (featureWelcome never rejects); beforePresence can.
    const welcome = this.featureWelcome(conn);
    let res;
    try {
      res = await this.presence.join(conn.lessonId, { now, node: this.nodeId, conn: conn.id, person: conn.userHash, info: conn.person, rejoin: false, seed });
    } catch (err) {
      this.log.warn({ err: (err as Error).message, conn: conn.id, lesson_id: conn.lessonId }, 'presence unavailable at join');
      conn.close('unavailable');
      return;
    }
    const t2 = performance.now();
    this.metrics.call('redis', 'presence.join', t2 - t1);
    // In the order Redis decided (no await since the join): the meter's transitions are applied in
    // that order, and the others drop a presence event older than the last they applied.
    void this.meter.apply(conn.lessonId, res, now);
    const seq = res.meter?.seq ?? 0;
    if (res.first) this.presenceEvent(conn.lessonId, 'joined', conn.person, seq, res.count, { except: conn, remote: res.remote });
    // every arrival, not only the first: a second tab may come through another link (attendance lists each)
    this.mark(conn.lessonId, conn.person.id, true, conn.link.link_id, now);
    if (res.announce) this.announce(conn.link, now);
    // Presence events of the lesson from here to makePresent are replayed to the newcomer there (seq > its own).
    const extras = await welcome;
    const tFeatures = performance.now();
    if (conn.state !== 'admitting') return;
    lesson.makePresent(conn, welcomeFrame(conn, res.people, seq, extras, this.deps.config), seq);
    this.metrics.joined(performance.now() - conn.upgradeAt);
    if (this.log.isLevelEnabled('debug')) {
      this.log.debug({ conn: conn.id, lesson_id: conn.lessonId, upgrade_ms: +(t0 - conn.upgradeAt).toFixed(2), ready_ms: +(tReady - t0).toFixed(2), seed_wait_ms: +(t1 - tReady).toFixed(2), presence_ms: +(t2 - t1).toFixed(2), features_ms: +(tFeatures - t2).toFixed(2), welcome_ms: +(performance.now() - tFeatures).toFixed(2) }, 'present');
    }
    for (const f of this.features) if (f.onPresent) this.runHook(f, 'onPresent', () => f.onPresent!(this.featureContext(conn)));
  }

  /**
   * Presence hears of the departure, then the features' onClosed runs. If
   * Redis is unreachable the departure waits in pendingLeaves (dated when the
   * socket closed) and onClosed runs when a retry succeeds.
   */
  private async leave(conn: ClientConnection, at: number): Promise<void> {
    let res;
    const t0 = performance.now();
    try {
      res = await this.presence.leave(conn.lessonId, conn.id, this.now(), at);
      this.metrics.call('redis', 'presence.leave', performance.now() - t0);
    } catch (err) {
      this.log.warn({ err: (err as Error).message, conn: conn.id, lesson_id: conn.lessonId }, 'presence unavailable at leave; will retry');
      this.pendingLeaves.push({ conn, at });
      return;
    }
    this.departed(conn, res, at);
  }

  private departed(conn: ClientConnection, res: Awaited<ReturnType<Presence['leave']>>, at: number): void {
    this.certainty.reported(conn);
    this.runClosedHooks(conn, !!res?.last);
    if (res) this.applyDeparture(conn.lessonId, res.last && res.person ? [res.person] : [], res, at, res.remote);
  }

  private runClosedHooks(conn: ClientConnection, personLeft: boolean): void {
    for (const f of this.features) if (f.onClosed) this.runHook(f, 'onClosed', () => f.onClosed!({ ...this.featureContext(conn), personLeft }));
  }

  /** Departures waiting for Redis (Maintenance retries them). */
  get pendingDepartures(): number {
    return this.pendingLeaves.length;
  }

  /** Retries departures Redis did not hear (Maintenance, after Redis is back). */
  async retryPendingLeaves(): Promise<void> {
    const batch = this.pendingLeaves.splice(0);
    for (const p of batch) {
      let res;
      try {
        res = await this.presence.leave(p.conn.lessonId, p.conn.id, this.now(), p.at);
      } catch {
        this.pendingLeaves.push(p);
        continue;
      }
      this.departed(p.conn, res, p.at);
    }
  }

  /**
   * People left (a departure, or a dead node's connections reaped): tell the lesson, apply the meter.
   * `remote`: whether another node has connections left in the lesson (unknown: the event crosses the bus).
   */
  applyDeparture(lessonId: string, left: PublicPerson[], change: Change, at: number, remote?: boolean): void {
    const seq = change.meter?.seq ?? 0;
    for (const person of left) {
      this.presenceEvent(lessonId, 'left', person, seq, change.count, { remote });
      this.mark(lessonId, person.id, false, null, at);
    }
    void this.meter.apply(lessonId, change, at);
  }

  /** Redis lost this node's registrations: register every live connection again (presence/ReRegistration.ts). */
  reRegister(onlyLessons?: string[]): Promise<void> {
    return this.reRegistration.run(onlyLessons);
  }

  // ---- lifecycle -----------------------------------------------------------

  /**
   * Before serving: takes this node's lease (other nodes never see our people
   * without one), starts its listeners (archived lessons, lesson updates),
   * admission and the features (their own LISTENs: the teacher's removals),
   * warms its parts up (the read pool's connections, the presence scripts: so that everyone
   * reconnecting after a deploy does not also wait for those), then starts
   * the periodic work. `timers: false` leaves Maintenance to the caller (tests).
   */
  async start(opts: { timers?: boolean } = {}): Promise<void> {
    await this.maintenance.guard('heartbeat', () => this.maintenance.heartbeat());
    for (const listen of this.listeners) this.unlisteners.push(await listen(this));
    await this.admission.start();
    for (const f of this.features) await f.start?.();
    await this.warmUp();
    if (opts.timers ?? true) this.maintenance.start();
  }

  /** A failure is left to the first real use to report. */
  private async warmUp(): Promise<void> {
    await Promise.all([this.warmUpParts?.(), this.presence.warmUp()]).catch((err) =>
      this.log.warn({ err: (err as Error).message }, 'warm-up failed'),
    );
  }

  /** Whether a drain started: the transport refuses upgrades and /readyz answers 503. */
  get isDraining(): boolean {
    return this.drainer.started;
  }

  /** Graceful drain before a stop (Drain.ts). */
  drain(budgetMs: number): Promise<void> {
    return this.drainer.run(budgetMs);
  }

  /**
   * Graceful stop (after the transport stopped accepting): stops the timers,
   * closes every socket (1001), records their departures, lets the features
   * release what they hold, drops the lease and the bus. Idempotent.
   */
  close(): Promise<void> {
    return (this.closing ??= (async () => {
      this.maintenance.stop();
      await this.announcer.forgetUnrecorded(); // before anyone moves to another node
      for (const lesson of [...this.lessonsById.values()]) for (const conn of [...lesson.conns]) conn.close('goingAway');
      await this.idle();
      // departures Redis never heard: the features still hear of the sockets (presence drops the node below)
      for (const p of this.pendingLeaves.splice(0)) {
        this.certainty.reported(p.conn);
        this.runClosedHooks(p.conn, false);
      }
      await this.idle();
      this.announcer.close();
      await withTimeout(this.presenceLog.idle(), PRESENCE_LOG_STOP_WAIT_MS).catch(() => undefined);
      this.presenceLog.close();
      for (const f of this.features) await f.close?.().catch((err) => this.log.error({ err, feature: f.name }, 'feature close failed'));
      await this.presence.leaveNode(this.nodeId).catch(() => undefined);
      for (const unlisten of this.unlisteners.splice(0)) await unlisten().catch(() => undefined);
      await this.admission.stop().catch(() => undefined);
      await this.bus.close();
    })());
  }

  /** The lesson was deleted (ArchiveListener.ts). */
  archived(lessonId: string): Promise<void> {
    return archiveLesson(this, lessonId);
  }

  /**
   * Resolves once nothing is in flight: joins, departures (and the onClosed
   * hooks after them), feature hooks, bus publishes, participant.joined and
   * the meter's Postgres work. Each may queue more of the others, so it loops
   * until one pass finds everything empty.
   */
  async idle(): Promise<void> {
    for (;;) {
      while (this.tasks.size > 0) await Promise.allSettled([...this.tasks]);
      await this.announcer.idle();
      // a stop does not wait out the retries of marks while Postgres is away (close bounds it)
      if (!this.closing) await this.presenceLog.idle();
      await this.meter.idle();
      await this.bus.idle();
      if (this.tasks.size === 0) return;
    }
  }

  now(): number {
    return this.deps.clock.now().getTime();
  }

  // ---- internals -----------------------------------------------------------

  private track<T>(p: Promise<T>): Promise<T> {
    this.tasks.add(p);
    void p.then(
      () => this.tasks.delete(p),
      () => this.tasks.delete(p),
    );
    return p;
  }

  private runHook(f: GatewayFeature, hook: string, fn: () => unknown): void {
    let r: unknown;
    try {
      r = fn();
    } catch (err) {
      this.log.error({ err, feature: f.name }, `${hook} failed`);
      return;
    }
    if (r instanceof Promise) this.track(r.catch((err) => this.log.error({ err, feature: f.name }, `${hook} failed`)));
  }

  /** The lesson opens with its first socket here: bus channel first, then the features' lesson state. */
  private lessonFor(lessonId: string): Lesson {
    let lesson = this.lessonsById.get(lessonId);
    if (lesson) return lesson;
    const s = this.lessonShared;
    const l = new Lesson(lessonId, this.bus, s.limits, this.log, s.now, this.fanout, s.onFeatureEnvelope, s.countOut);
    l.ready = this.track(this.openLesson(l));
    l.ready.catch(() => undefined);
    this.lessonsById.set(lessonId, (lesson = l));
    return lesson;
  }

  private async openLesson(lesson: Lesson): Promise<void> {
    await this.bus.subscribe(lesson.id);
    for (const f of this.features) {
      if (!f.onLessonOpen || lesson.closed) continue;
      try {
        await f.onLessonOpen(lesson);
      } catch (err) {
        this.log.warn({ err: (err as Error).message, feature: f.name, lesson_id: lesson.id }, 'lesson state unavailable at open');
        throw err;
      }
    }
  }

  /** The last socket here closed: features drop their state, the bus channel goes. */
  private closeLesson(lesson: Lesson): void {
    lesson.closed = true;
    if (this.lessonsById.get(lesson.id) === lesson) this.lessonsById.delete(lesson.id);
    void this.bus.unsubscribe(lesson.id);
    // after its open finished, so that what the open set up is what is released
    this.track(
      lesson.ready.then(
        () => {
          for (const f of this.features) if (f.onLessonClose) this.runHook(f, 'onLessonClose', () => f.onLessonClose!(lesson));
        },
        () => {
          for (const f of this.features) if (f.onLessonClose) this.runHook(f, 'onLessonClose', () => f.onLessonClose!(lesson));
        },
      ),
    );
  }

  /** To the lesson's other nodes when no socket of it is here (a feature acting on a lesson it does not serve here). */
  private publishTo(lessonId: string, e: Outgoing): void {
    this.bus.publish(lessonId, e).catch((err) => this.log.warn({ err: (err as Error).message, lesson_id: lessonId, kind: e.kind }, 'bus publish failed'));
  }

  /**
   * A presence event to the lesson's sockets here and, unless presence said no other node has
   * connections in the lesson when it decided the event (`remote` false), on the other nodes.
   */
  /** @internal for ReRegistration */
  presenceEvent(lessonId: string, event: 'joined' | 'left', person: PublicPerson, seq: number, count: number, opts: { except?: ClientConnection; exceptPerson?: string; remote?: boolean } = {}): void {
    const frame = presenceFrame(event, person, seq, count);
    const lesson = this.lessonsById.get(lessonId);
    if (lesson) lesson.broadcastPresence(seq, frame, opts);
    else if (opts.remote !== false) this.publishTo(lessonId, { kind: 'presence', seq, exceptPerson: opts.exceptPerson, payload: frame });
  }

  /** The features' last refusals (GatewayFeature.beforePresence), in their order; one that throws closes the arrival with 4503. */
  private async beforePresence(conn: ClientConnection): Promise<void> {
    for (const f of this.features) {
      if (!f.beforePresence || conn.state === 'closed') continue;
      try {
        const pending = f.beforePresence(this.featureContext(conn));
        if (pending) await pending;
      } catch (err) {
        this.log.error({ err, feature: f.name }, 'beforePresence failed');
        conn.close('unavailable');
      }
    }
  }

  private async featureWelcome(conn: ClientConnection): Promise<Record<string, unknown>> {
    // in parallel (each is one Redis or Postgres read at most), merged in the features' order
    const parts = await Promise.all(
      this.features.map(async (f) => {
        if (!f.welcome) return undefined;
        try {
          return await f.welcome(this.featureContext(conn));
        } catch (err) {
          this.log.error({ err, feature: f.name }, 'welcome contribution failed');
          return undefined;
        }
      }),
    );
    return Object.assign({}, ...parts) as Record<string, unknown>;
  }

  private featureContext(conn: ClientConnection): FeatureContext {
    return { conn, link: conn.link, gateway: this };
  }

  /** A presence mark for attendance, dated as the meter dates the arrival or departure. */
  /** @internal for ReRegistration */
  mark(lessonId: string, personId: string, joined: boolean, linkId: string | null, at: number): void {
    this.presenceLog.add({ lessonId, personId, joined, linkId, at: new Date(at) });
  }

  /** participant.joined: Redis filtered the obvious repeats; Postgres decides (6 h window, race-safe). */
  private announce(link: ResolvedLink, now: number): void {
    this.announcer.add({
      lessonId: link.lesson_id,
      partnerId: link.partner_id,
      externalId: link.external_id,
      userHash: link.user_hash,
      role: link.role,
      name: link.name,
      linkId: link.link_id,
      at: new Date(now),
    });
  }

  /**
   * The meter as Maintenance uses it, with the periodic flush measured: its Postgres time, the flush
   * lag (reset after each flush round) and which lessons here have their session running.
   */
  private meteredFlush(): ConstructorParameters<typeof Maintenance>[2] {
    const meter = this.meter;
    return {
      apply: (l, c, now) => meter.apply(l, c, now),
      finishEnd: (l, m, now) => meter.finishEnd(l, m, now),
      endUnknown: (l, s, e, now) => meter.endUnknown(l, s, e, now),
      remember: (l, m, p, now) => meter.remember(l, m, p, now),
      startsPending: () => meter.startsPending(),
      startSettled: (l) => meter.startSettled(l),
      retryStart: (l, now) => meter.retryStart(l, now),
      flush: async (results, now) => {
        for (const r of results) {
          const lesson = this.lessonsById.get(r.lessonId);
          if (lesson) lesson.meterRunning = r.meter?.state === 'running';
        }
        const t0 = performance.now();
        await meter.flush(results, now);
        this.metrics.call('postgres', 'meter.flush', performance.now() - t0);
        this.metrics.meterFlushed();
      },
    };
  }

  /** Lessons here whose session ran at the last flush. */
  private sessionsRunning(): number {
    let n = 0;
    for (const lesson of this.lessonsById.values()) if (lesson.meterRunning) n++;
    return n;
  }

  private handlerFailed(conn: ClientConnection, type: string, err: unknown): void {
    this.log.error({ err, type, conn: conn.id, lesson_id: conn.lessonId }, 'message handler failed');
    conn.sendError('internal', 'the message could not be processed', type);
  }
}

/** How long a stopping node waits for its last presence marks to be written (Postgres may be away). */
const PRESENCE_LOG_STOP_WAIT_MS = 2000;


