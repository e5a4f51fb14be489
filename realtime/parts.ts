import { hostname } from 'node:os';
import type { Deps } from '../src/deps.js';
import { warmPool } from '../src/db/index.js';
import { recordPresenceMarks } from '../src/domain/attendance.js';
import { randomBase62 } from '../src/lib/crypto.js';
import type { GatewayMetrics } from '../src/metrics/gateway.js';
import type { MeterSeed } from '../src/metering/meters.js';
import { recordParticipantsJoined } from '../src/metering/participants.js';
import type { Redis } from '../src/redis.js';
import { Admission } from './admission/Admission.js';
import { InMemoryLinks } from './admission/InMemoryLinks.js';
import { postgresLinks } from './admission/LinkSource.js';
import { PERSON_RATES, PersonRates } from './admission/PersonRates.js';
import { listenForArchives } from './ArchiveListener.js';
import type { Bus } from './bus/Bus.js';
import { BusHub, InMemoryBus } from './bus/InMemoryBus.js';
import { LessonBus } from './bus/LessonBus.js';
import type { GatewayFeature } from './features/api.js';
import type { Gateway } from './Gateway.js';
import { listenForLessonUpdates } from './LessonUpdateListener.js';
import { InMemoryLedger } from './metering/InMemoryLedger.js';
import { JoinAnnouncer } from './metering/JoinAnnouncer.js';
import type { RetrySchedule } from './metering/KeptForLater.js';
import { Meter, type MeterRetries } from './metering/Meter.js';
import { postgresLedger, type MeterLedger } from './metering/MeterLedger.js';
import { PresenceLog } from './metering/PresenceLog.js';
import { InMemoryPresence } from './presence/InMemoryPresence.js';
import type { Presence } from './presence/Presence.js';
import { gatewayTiming } from './timing.js';

export interface GatewayOptions {
  features?: GatewayFeature[];
  /** fixed node id (tests); default host:pid:random */
  nodeId?: string;
  /** the gateway's Prometheus families (src/metrics/gateway.ts); omitted (METRICS_PORT off): nothing is recorded */
  metrics?: GatewayMetrics;
  /** the waits between Postgres attempts (tests of an outage shorten them); omitted: the production ones */
  retries?: { meter?: MeterRetries; joins?: RetrySchedule; presenceLog?: RetrySchedule };
}

/** Something the gateway listens to while it runs (a Postgres LISTEN); resolves to the way to stop. */
export type GatewayListener = (gw: Gateway) => Promise<() => Promise<void>>;

/**
 * What a Gateway is made of. The gateway builds none of them: startGateway
 * (realtime/index.ts) takes the production ones from gatewayParts; memoryParts
 * gives in-process ones (no Postgres, no Redis) for the core's unit tests.
 */
export interface GatewayParts {
  nodeId: string;
  features: GatewayFeature[];
  metrics?: GatewayMetrics;
  /** who is in which lesson across nodes, and the meter's state (RedisPresence; InMemoryPresence in tests) */
  presence: Presence;
  /** each lesson's channel to the other nodes (LessonBus; InMemoryBus in tests) */
  bus: Bus;
  /** the meter's transitions and charges, written to the ledger */
  meter: Meter;
  /** the meter's ledger (Postgres), which the sweeps and the archive handling also read */
  ledger: MeterLedger;
  /** link tokens to lessons and people, and the refusals at the upgrade */
  admission: Admission;
  /** participant.joined, decided by Postgres */
  announcer: JoinAnnouncer;
  /** chat and board budgets per person across nodes */
  personRates: PersonRates;
  /** arrivals and departures for attendance */
  presenceLog: PresenceLog;
  /** what Postgres knows of a lesson's meter, read alongside a new lesson's bus subscription */
  loadSeed?: (lessonId: string) => Promise<MeterSeed | undefined>;
  /** heard from start to close: archived lessons, lesson updates */
  listeners: GatewayListener[];
  /** opens connections before serving (the read pool), so that the first arrivals do not wait for them */
  warmUp?: () => Promise<unknown>;
}

/** The production parts around a presence: bus and per-person rates on the node's Redis connection, the rest on Postgres. */
export function gatewayParts(
  deps: Deps,
  opts: GatewayOptions & { presence: Presence; redis: Redis; loadSeed?: GatewayParts['loadSeed']; bus?: Bus },
): GatewayParts {
  const nodeId = opts.nodeId ?? `${hostname()}:${process.pid}:${randomBase62(8)}`;
  const log = deps.log.child({ component: 'gateway', node: nodeId });
  const presence = opts.presence;
  const ledger = postgresLedger(deps.sql);
  return {
    nodeId,
    features: opts.features ?? [],
    metrics: opts.metrics,
    presence,
    loadSeed: opts.loadSeed,
    bus: opts.bus ?? new LessonBus(opts.redis, deps.config.REDIS_KEY_PREFIX, nodeId, log),
    ledger,
    meter: new Meter(ledger, deps.log, presence, heartbeatMs(deps), opts.retries?.meter),
    admission: new Admission(deps, postgresLinks(deps)),
    announcer: new JoinAnnouncer((batch) => recordParticipantsJoined(deps.sql, batch), log, (j) => presence.forgetJoined(j.lessonId, j.userHash, j.at.getTime()), opts.retries?.joins),
    personRates: new PersonRates(opts.redis, PERSON_RATES),
    presenceLog: new PresenceLog((batch) => recordPresenceMarks(deps.sql, batch), log, opts.retries?.presenceLog),
    listeners: [listenForArchives, listenForLessonUpdates],
    warmUp: () => warmPool(deps.readSql, deps.config.DATABASE_READ_POOL_SIZE),
  };
}

/** What a memoryParts deployment shares between its nodes: presence, the bus's hub, the ledger, the links. */
export interface MemoryWorld {
  presence: InMemoryPresence;
  hub: BusHub;
  ledger: InMemoryLedger;
  links: InMemoryLinks;
}

/** One deployment's shared state in the process: give it to each node's memoryParts. */
export function memoryWorld(config: Deps['config']): MemoryWorld {
  const ledger = new InMemoryLedger();
  return { presence: new InMemoryPresence({ ...gatewayTiming(config), loadSeed: (id) => ledger.seed(id) }), hub: new BusHub(), ledger, links: new InMemoryLinks() };
}

/**
 * A node's parts without Postgres or Redis: presence, bus, ledger and links of `world` (shared by
 * the nodes of one test), per-person rates kept in the process, participant.joined and the presence
 * marks written to the in-memory ledger. Nothing listens (nothing notifies without Postgres).
 */
export function memoryParts(deps: Pick<Deps, 'config' | 'clock' | 'log'>, world: MemoryWorld, opts: GatewayOptions & { presence?: Presence } = {}): GatewayParts {
  const nodeId = opts.nodeId ?? `memory:${randomBase62(8)}`;
  const log = deps.log.child({ component: 'gateway', node: nodeId });
  const presence = opts.presence ?? world.presence;
  const { ledger } = world;
  return {
    nodeId,
    features: opts.features ?? [],
    metrics: opts.metrics,
    presence,
    bus: new InMemoryBus(world.hub, nodeId),
    ledger,
    meter: new Meter(ledger, deps.log, presence, heartbeatMs(deps), opts.retries?.meter),
    admission: new Admission(deps, world.links),
    announcer: new JoinAnnouncer((batch) => ledger.recordJoins(batch), log, (j) => presence.forgetJoined(j.lessonId, j.userHash, j.at.getTime()), opts.retries?.joins),
    personRates: new PersonRates(null, PERSON_RATES),
    presenceLog: new PresenceLog((batch) => ledger.recordMarks(batch), log, opts.retries?.presenceLog),
    listeners: [],
  };
}

/** How old a meter's snapshot may get before a flush rewrites it unchanged: a third of the orphan limit. */
function heartbeatMs(deps: Pick<Deps, 'config'>): number {
  return Math.floor(gatewayTiming(deps.config).orphanMs / 3);
}
