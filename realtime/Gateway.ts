import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { hostname } from 'node:os';
import type { Deps } from '../src/deps.js';
import type { ResolvedLink } from '../src/domain/links.js';
import type { Logger } from '../src/logger.js';
import { readMeterSeeds, type MeterSeed } from '../src/metering/meters.js';
import { randomBase62 } from '../src/lib/crypto.js';
import { Admission } from './admission/Admission.js';
import { LocalPeople, type LocalPerson } from './admission/LocalPeople.js';
import { PERSON_RATES, PersonRates } from './admission/PersonRates.js';
import { LessonBus } from './bus/LessonBus.js';
import { ClientConnection, type SocketLike } from './ClientConnection.js';
import type { FeatureContext, GatewayApi, GatewayFeature } from './features.js';
import { LessonRoom, type Fanout } from './LessonRoom.js';
import { Batcher } from '../src/lib/Batcher.js';
import { mapLimit } from './lib/KeyedQueue.js';
import { gatewayTiming } from './timing.js';
import type { Redis } from '../src/redis.js';
import { JoinAnnouncer } from './metering/JoinAnnouncer.js';
import { Meter } from './metering/Meter.js';
import type { Change, Presence, PublicPerson } from './presence/Presence.js';
import { RedisPresence } from './presence/RedisPresence.js';
import { coreMessages } from './protocol/messages/index.js';
import { MessageRegistry } from './protocol/registry.js';
import { presenceFrame, presenceSyncFrame } from './protocol/serverMessages.js';
import { welcomeFrame } from './protocol/welcome.js';

/** How a relayed cursor frame starts (protocol/messages/cursor.ts): its sender's id follows. */
const CURSOR_FROM = '{"type":"cursor","from":"';
const NONE: readonly ClientConnection[] = [];

export interface GatewayOptions {
  features?: GatewayFeature[];
  /** fixed node id (tests); default host:pid:random */
  nodeId?: string;
}

/**
 * The gateway's core, independent of the socket library: admits
 * connections, registers people in Presence, sends `welcome`, dispatches
 * messages through the registry, broadcasts to lessons across nodes, and
 * hands meter transitions to the Meter. server.ts glues uWS to it;
 * Maintenance.ts runs its timers.
 */
export class Gateway implements GatewayApi {
  readonly nodeId: string;
  readonly registry = new MessageRegistry();
  readonly presence: Presence;
  readonly meter: Meter;
  readonly admission: Admission;
  /** each person's sockets on this node: the socket cap and the cursor budget (limits per person) */
  readonly people: LocalPeople;
  private readonly personRates: PersonRates;
  readonly bus: LessonBus;
  readonly timing: ReturnType<typeof gatewayTiming>;
  readonly log: Logger;
  readonly rooms = new Map<string, LessonRoom>();
  /** departures Redis did not hear (it was unreachable), retried by Maintenance */
  readonly pendingLeaves: { lessonId: string; connId: string; at: number }[] = [];
  private readonly features: GatewayFeature[];
  private readonly announcer: JoinAnnouncer;
  readonly redis: Redis;
  private readonly seeds: Batcher<string, MeterSeed | undefined>;
  private fanout: Fanout | undefined;
  private connSeq = 0;
  private readonly departures = new Set<Promise<void>>();
  private reRegistering: Promise<void> | undefined;

  constructor(
    readonly deps: Deps,
    opts: GatewayOptions = {},
  ) {
    this.nodeId = opts.nodeId ?? `${hostname()}:${process.pid}:${randomBase62(8)}`;
    this.log = deps.log.child({ component: 'gateway', node: this.nodeId });
    this.timing = gatewayTiming(deps.config);
    this.features = opts.features ?? [];
    // Our own connection with auto-pipelining: the commands of many joins in
    // one event-loop turn go out in one write.
    this.redis = deps.redis.duplicate({ enableAutoPipelining: true });
    this.redis.on('error', (err) => this.log.warn({ err: err.message }, 'redis error'));
    // the first arrival in a lesson Redis does not know reads its meter from Postgres; a burst shares one statement
    this.seeds = new Batcher<string, MeterSeed | undefined>((ids) => readMeterSeeds(deps.readSql, ids), {
      delayMs: 1,
      max: 100,
      concurrency: deps.config.DATABASE_READ_POOL_SIZE,
    });
    this.presence = new RedisPresence(this.redis, {
      idleMs: this.timing.idleMs,
      leaseMs: this.timing.leaseMs,
      flushMs: this.timing.flushMs,
      graceMs: this.timing.graceMs,
      startRetryMs: this.timing.startRetryMs,
      loadSeed: (lessonId) => this.seeds.add(lessonId),
    });
    this.meter = new Meter(deps, this.presence, Math.floor(this.timing.orphanMs / 3));
    this.admission = new Admission(deps);
    const c = deps.config;
    this.people = new LocalPeople(c.GATEWAY_MAX_SOCKETS_PER_PERSON, c.GATEWAY_PERSON_CURSORS_PER_SECOND, c.GATEWAY_PERSON_CURSOR_BURST);
    this.personRates = new PersonRates(this.redis, PERSON_RATES);
    this.announcer = new JoinAnnouncer(deps.sql, this.log);
    this.bus = new LessonBus(
      this.redis,
      deps.config.REDIS_KEY_PREFIX,
      this.nodeId,
      {
        frame: (lessonId, frame) => this.deliverFromBus(lessonId, frame),
        hello: (lessonId) => {
          const room = this.rooms.get(lessonId);
          if (room) room.remoteListeners = true;
        },
      },
      this.log,
    );
    this.registry.register(...coreMessages);
    for (const f of this.features) if (f.messages) this.registry.register(...f.messages);
  }

  /** The transport's delivery to lesson topics (uWS); rooms loop over their sockets without it. */
  useFanout(fanout: Fanout): void {
    this.fanout = fanout;
  }

  featureList(): readonly GatewayFeature[] {
    return this.features;
  }

  // ---- transport callbacks -------------------------------------------------

  /** A socket finished its upgrade with an admitted link. */
  open(socket: SocketLike, link: ResolvedLink, ip: string): ClientConnection {
    const c = this.deps.config;
    const conn = new ClientConnection(
      `${this.nodeId}#${++this.connSeq}`,
      socket,
      link,
      { id: publicPersonId(link.lesson_id, link.user_hash), name: link.name, role: link.role },
      ip,
      { messagesPerSecond: c.GATEWAY_MESSAGES_PER_SECOND, burst: c.GATEWAY_MESSAGE_BURST },
      this.now(),
    );
    // past the cap the person's oldest sockets go (4409): a new tab wins over a forgotten one
    for (const old of this.people.add(conn, conn.openedAt)) old.close('replaced');
    const fresh = !this.rooms.has(link.lesson_id);
    const room = this.roomFor(link.lesson_id);
    room.conns.add(conn);
    conn.joined = this.join(conn, room, fresh).catch((err) => {
      this.log.error({ err, lesson_id: conn.lessonId }, 'join failed');
      conn.close('internal');
    });
    return conn;
  }

  message(conn: ClientConnection, data: ArrayBuffer | string, isBinary: boolean): void {
    const size = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
    if (size > this.deps.config.GATEWAY_MAX_PAYLOAD_BYTES) {
      conn.close('payloadTooLarge');
      return;
    }
    if (conn.state !== 'present') {
      if (conn.state === 'admitting') conn.sendError('not_ready', 'wait for welcome before sending');
      return;
    }
    const now = this.now();
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

  /** The socket is gone (any reason). The departure is dated now. */
  closed(conn: ClientConnection): void {
    if (conn.state === 'closed') return;
    const at = this.now();
    conn.state = 'closed';
    this.people.remove(conn);
    const room = this.rooms.get(conn.lessonId);
    if (room) {
      room.conns.delete(conn);
      if (room.conns.size === 0) {
        this.rooms.delete(conn.lessonId);
        this.bus.unsubscribe(conn.lessonId);
        this.meter.forget(conn.lessonId);
      }
    }
    const departure = conn.joined.then(() => this.leave(conn, at));
    this.departures.add(departure);
    void departure.finally(() => this.departures.delete(departure));
  }

  // ---- GatewayApi ----------------------------------------------------------

  broadcast(lessonId: string, frame: string | object, opts: { except?: ClientConnection; exceptPerson?: string; ephemeral?: boolean } = {}): void {
    const text = typeof frame === 'string' ? frame : JSON.stringify(frame);
    const room = this.rooms.get(lessonId);
    if (room && opts.exceptPerson) this.deliverExceptPerson(room, text, opts.exceptPerson, opts.except);
    else room?.deliver(text, opts.except);
    this.publishRemote(lessonId, text, room, opts.ephemeral ?? false);
  }

  localPerson(lessonId: string, personId: string): LocalPerson | undefined {
    return this.people.get(lessonId, personId);
  }

  /**
   * Everyone here but one person's sockets. The common case, the person's only
   * socket here is the sender (or they have none here), stays one uWS topic
   * publish; only a person with several sockets here costs a loop.
   */
  private deliverExceptPerson(room: LessonRoom, text: string, personId: string, sender?: ClientConnection): void {
    // per cursor frame: a loop that allocates nothing and stops at the first other socket
    let othersHere = false;
    for (const c of this.people.get(room.lessonId, personId)?.conns ?? NONE) {
      if (c !== sender && c.state === 'present') {
        othersHere = true;
        break;
      }
    }
    if (!othersHere) return room.deliver(text, sender);
    for (const c of room.conns) if (c.state === 'present' && c.person.id !== personId) c.send(text);
  }

  localConnections(lessonId: string): ClientConnection[] {
    return this.rooms.get(lessonId)?.present() ?? [];
  }

  // ---- presence ------------------------------------------------------------

  private async join(conn: ClientConnection, room: LessonRoom, freshRoom: boolean): Promise<void> {
    const t0 = performance.now();
    // A lesson new on this node is often new to Redis too (its first arrival):
    // read its meter seed from Postgres while the features prepare the welcome
    // and the bus subscribes, instead of after Redis asks for it (two round
    // trips more before welcome). Used only if Redis has no meter for the
    // lesson, and then no node has written the lesson's meter since: a node
    // flushes a meter only while Redis holds it.
    const seedRead = freshRoom ? this.seeds.add(conn.lessonId).catch(() => undefined) : undefined;
    const extras = await this.featureWelcome(conn);
    const tFeatures = performance.now();
    await room.busReady;
    const tBus = performance.now();
    const seed = await seedRead;
    const t1 = performance.now();
    if (conn.state === 'closed') return;
    const now = this.now();
    let res;
    try {
      res = await this.presence.join(conn.lessonId, { now, node: this.nodeId, conn: conn.id, person: conn.userHash, info: conn.person, rejoin: false, seed });
    } catch (err) {
      this.log.warn({ err: (err as Error).message, lesson_id: conn.lessonId }, 'presence unavailable at join');
      conn.close('unavailable');
      return;
    }
    const t2 = performance.now();
    void this.meter.apply(conn.lessonId, res, now);
    const seq = res.meter?.seq ?? 0;
    if (res.first) this.presenceEvent(conn.lessonId, 'joined', conn.person, seq, res.count, conn);
    if (res.announce) this.announce(conn.link, now);
    if (conn.state !== 'admitting') return;
    room.makePresent(conn, welcomeFrame(conn, res.people, seq, extras, this.deps.config), seq);
    if (this.log.isLevelEnabled('debug')) {
      this.log.debug({ lesson_id: conn.lessonId, features_ms: +(tFeatures - t0).toFixed(2), bus_ms: +(tBus - tFeatures).toFixed(2), seed_wait_ms: +(t1 - tBus).toFixed(2), presence_ms: +(t2 - t1).toFixed(2), welcome_ms: +(performance.now() - t2).toFixed(2) }, 'present');
    }
    for (const f of this.features) {
      if (f.onPresent) void Promise.resolve(f.onPresent(this.featureContext(conn))).catch((err) => this.log.error({ err, feature: f.name }, 'onPresent failed'));
    }
  }

  private async leave(conn: ClientConnection, at: number): Promise<void> {
    let res;
    try {
      res = await this.presence.leave(conn.lessonId, conn.id, at);
    } catch (err) {
      this.log.warn({ err: (err as Error).message, lesson_id: conn.lessonId }, 'presence unavailable at leave; will retry');
      this.pendingLeaves.push({ lessonId: conn.lessonId, connId: conn.id, at });
      return;
    }
    for (const f of this.features) {
      if (f.onClosed) void Promise.resolve(f.onClosed({ ...this.featureContext(conn), personLeft: !!res?.last })).catch((err) => this.log.error({ err, feature: f.name }, 'onClosed failed'));
    }
    if (res) this.applyDeparture(conn.lessonId, res.last && res.person ? [res.person] : [], res, at);
  }

  /** Retries departures Redis did not hear (Maintenance, after Redis is back). */
  async retryPendingLeaves(): Promise<void> {
    const batch = this.pendingLeaves.splice(0);
    for (const p of batch) {
      try {
        const res = await this.presence.leave(p.lessonId, p.connId, this.now(), p.at);
        if (res) this.applyDeparture(p.lessonId, res.last && res.person ? [res.person] : [], res, p.at);
      } catch {
        this.pendingLeaves.push(p);
      }
    }
  }

  /** People left (a departure, or a dead node's connections reaped): tell the lesson, apply the meter. */
  applyDeparture(lessonId: string, left: PublicPerson[], change: Change, at: number): void {
    const seq = change.meter?.seq ?? 0;
    for (const person of left) this.presenceEvent(lessonId, 'left', person, seq, change.count);
    void this.meter.apply(lessonId, change, at);
  }

  /**
   * Redis lost our registrations (flush, restart, or we were reaped after a
   * stall): register every live connection again. The live connections are
   * the truth; no participant.joined is recorded for them again.
   */
  reRegister(onlyLessons?: string[]): Promise<void> {
    if (this.reRegistering) return this.reRegistering;
    const rooms = onlyLessons ? onlyLessons.map((id) => this.rooms.get(id)).filter((r): r is LessonRoom => !!r) : [...this.rooms.values()];
    if (rooms.length === 0) return Promise.resolve();
    this.log.warn({ lessons: rooms.length }, 're-registering live connections');
    this.reRegistering = mapLimit(rooms, 8, (room) => this.reRegisterRoom(room))
      .then(() => undefined)
      .finally(() => (this.reRegistering = undefined));
    return this.reRegistering;
  }

  private async reRegisterRoom(room: LessonRoom): Promise<void> {
    for (const conn of room.present()) {
      const now = this.now();
      const res = await this.presence.join(room.lessonId, { now, node: this.nodeId, conn: conn.id, person: conn.userHash, info: conn.person, rejoin: true });
      void this.meter.apply(room.lessonId, res, now);
      if (res.first) this.presenceEvent(room.lessonId, 'joined', conn.person, res.meter?.seq ?? 0, res.count);
    }
    // Whoever left while Redis was away is not in Redis any more: resend the whole list.
    const { people, seq } = await this.presence.people(room.lessonId);
    room.deliver(presenceSyncFrame(people, seq));
  }

  // ---- lifecycle -----------------------------------------------------------

  /**
   * Before serving: opens the read pool's connections and loads the presence
   * scripts, so that the first arrivals after a start (everyone reconnecting
   * after a deploy) do not also wait for connections to be made and scripts to
   * be sent. A failure is left to the first real use to report.
   */
  async warmUp(): Promise<void> {
    const reads = Array.from({ length: this.deps.config.DATABASE_READ_POOL_SIZE }, () => this.deps.readSql`SELECT 1`);
    await Promise.all([...reads, this.presence.warmUp()]).catch((err) => this.log.warn({ err: (err as Error).message }, 'warm-up failed'));
  }

  /**
   * The lesson was deleted (pg_notify, or found by the sweeper): metering
   * stops at archived_at, sockets here close with 4410, the session ends
   * (lesson.ended is sent: the session did end).
   */
  async archived(lessonId: string): Promise<void> {
    this.admission.markArchived(lessonId);
    const [row] = await this.deps.sql<{ archived_at: Date | null }[]>`SELECT archived_at FROM lessons WHERE id = ${lessonId}`;
    if (!row?.archived_at) return;
    const now = this.now();
    const m = await this.presence.archiveEnd(lessonId, row.archived_at.getTime(), now);
    for (const conn of [...(this.rooms.get(lessonId)?.conns ?? [])]) conn.close('archived');
    if (m) await this.meter.finishEnd(lessonId, m, now);
  }

  /** Waits for queued Postgres work (tests and shutdown). */
  async idle(): Promise<void> {
    while (this.departures.size > 0) await Promise.all([...this.departures]);
    await this.announcer.idle();
    await this.meter.idle();
  }

  now(): number {
    return this.deps.clock.now().getTime();
  }

  // ---- internals -----------------------------------------------------------

  private roomFor(lessonId: string): LessonRoom {
    let room = this.rooms.get(lessonId);
    if (!room) {
      room = new LessonRoom(lessonId, this.fanout);
      room.busReady = this.bus.subscribe(lessonId);
      this.rooms.set(lessonId, room);
    }
    return room;
  }

  private presenceEvent(lessonId: string, event: 'joined' | 'left', person: PublicPerson, seq: number, count: number, except?: ClientConnection): void {
    const frame = presenceFrame(event, person, seq, count);
    const room = this.rooms.get(lessonId);
    room?.deliverPresence(seq, frame, except);
    this.publishRemote(lessonId, frame, room, false);
  }

  private publishRemote(lessonId: string, frame: string, room: LessonRoom | undefined, ephemeral: boolean): void {
    if (ephemeral && room && !room.remoteListeners) return;
    this.bus.publish(lessonId, frame).then(
      (receivers) => {
        const r = this.rooms.get(lessonId);
        if (r) r.remoteListeners = receivers > 1;
      },
      (err) => this.log.warn({ err: (err as Error).message, lesson_id: lessonId }, 'bus publish failed'),
    );
  }

  private deliverFromBus(lessonId: string, frame: string): void {
    const room = this.rooms.get(lessonId);
    if (!room) return;
    room.remoteListeners = true;
    if (frame.startsWith('{"type":"presence"')) {
      const seq = Number(/"seq":(\d+)/.exec(frame)?.[1] ?? 0);
      room.deliverPresence(seq, frame);
    } else if (frame.startsWith(CURSOR_FROM)) {
      // a person's own cursor never comes back to their sockets on this node either
      this.deliverExceptPerson(room, frame, frame.slice(CURSOR_FROM.length, frame.indexOf('"', CURSOR_FROM.length)));
    } else {
      room.deliver(frame);
    }
  }

  private async featureWelcome(conn: ClientConnection): Promise<Record<string, unknown>> {
    const extras: Record<string, unknown> = {};
    for (const f of this.features) {
      if (!f.welcome) continue;
      try {
        Object.assign(extras, await f.welcome(this.featureContext(conn)));
      } catch (err) {
        this.log.error({ err, feature: f.name }, 'welcome contribution failed');
      }
    }
    return extras;
  }

  private featureContext(conn: ClientConnection): FeatureContext {
    return { conn, link: conn.link, gateway: this };
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
      at: new Date(now),
    });
  }

  private handlerFailed(conn: ClientConnection, type: string, err: unknown): void {
    this.log.error({ err, type, lesson_id: conn.lessonId }, 'message handler failed');
    conn.sendError('internal', 'the message could not be processed', type);
  }
}

/**
 * A person's public id in one lesson: derived from the lesson and the keyed
 * user hash, so it is stable across tabs and reconnects, different in every
 * lesson, and reveals nothing of the partner's user id.
 */
export function publicPersonId(lessonId: string, userHash: string): string {
  return createHash('sha256').update(`${lessonId}:${userHash}`).digest('base64url').slice(0, 16);
}
