import { hostname } from 'node:os';
import type { Deps } from '../src/deps.js';
import { recordPresenceMarks } from '../src/domain/attendance.js';
import { randomBase62 } from '../src/lib/crypto.js';
import type { GatewayMetrics } from '../src/metrics/gateway.js';
import type { MeterSeed } from '../src/metering/meters.js';
import { recordParticipantsJoined } from '../src/metering/participants.js';
import type { Redis } from '../src/redis.js';
import { Admission } from './admission/Admission.js';
import { PERSON_RATES, PersonRates } from './admission/PersonRates.js';
import type { Bus } from './bus/Bus.js';
import { LessonBus } from './bus/LessonBus.js';
import type { GatewayFeature } from './features/api.js';
import { JoinAnnouncer } from './metering/JoinAnnouncer.js';
import type { RetrySchedule } from './metering/KeptForLater.js';
import { Meter, type MeterRetries } from './metering/Meter.js';
import { PresenceLog } from './metering/PresenceLog.js';
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

/**
 * What a Gateway is made of. The gateway builds none of them: startGateway
 * (realtime/index.ts) takes the production ones from gatewayParts, a unit
 * test may give others (an in-memory presence and bus).
 */
export interface GatewayParts {
  nodeId: string;
  features: GatewayFeature[];
  metrics?: GatewayMetrics;
  /** who is in which lesson across nodes, and the meter's state (RedisPresence; InMemoryPresence in tests) */
  presence: Presence;
  /** each lesson's channel to the other nodes (LessonBus; InMemoryBus in tests) */
  bus: Bus;
  /** the meter's transitions and charges in Postgres */
  meter: Meter;
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
}

/** The production parts around a presence: bus and per-person rates on the node's Redis connection, the rest on Postgres. */
export function gatewayParts(
  deps: Deps,
  opts: GatewayOptions & { presence: Presence; redis: Redis; loadSeed?: GatewayParts['loadSeed']; bus?: Bus },
): GatewayParts {
  const nodeId = opts.nodeId ?? `${hostname()}:${process.pid}:${randomBase62(8)}`;
  const log = deps.log.child({ component: 'gateway', node: nodeId });
  const presence = opts.presence;
  return {
    nodeId,
    features: opts.features ?? [],
    metrics: opts.metrics,
    presence,
    loadSeed: opts.loadSeed,
    bus: opts.bus ?? new LessonBus(opts.redis, deps.config.REDIS_KEY_PREFIX, nodeId, log),
    meter: new Meter(deps, presence, Math.floor(gatewayTiming(deps.config).orphanMs / 3), opts.retries?.meter),
    admission: new Admission(deps),
    announcer: new JoinAnnouncer((batch) => recordParticipantsJoined(deps.sql, batch), log, (j) => presence.forgetJoined(j.lessonId, j.userHash, j.at.getTime()), opts.retries?.joins),
    personRates: new PersonRates(opts.redis, PERSON_RATES),
    presenceLog: new PresenceLog((batch) => recordPresenceMarks(deps.sql, batch), log, opts.retries?.presenceLog),
  };
}
