import type { MeterSeed } from '../../src/metering/meters.js';
import type { Role } from '../../src/domain/enums.js';
import type { MeterState, Transition } from './MeterMachine.js';

/**
 * Presence of people in lessons across every gateway node, and the meter that
 * follows from it (the state machine of ./MeterMachine.ts). Two
 * implementations: RedisPresence (Lua, atomic, shared by every node) and
 * InMemoryPresence (one process: unit tests of the core, a single-node laptop
 * mode); test/realtime/presenceSuite.ts runs one suite against both. The
 * gateway's lesson logic and the Meter only see this interface.
 *
 * "Person" is the link's user_hash: one person in two tabs or on two devices
 * is one person. Every call that changes who is present returns the
 * transitions (`Effect`) the caller must apply in Postgres; a transition is
 * returned to exactly one caller, so it is applied once however many nodes race.
 */
export type Effect = Transition;
export type { MeterState };

/** What other participants may see of a person: never the partner's user id. */
export interface PublicPerson {
  id: string;
  name: string;
  role: Role;
}

export interface Change {
  count: number;
  meter: MeterState | null;
  effects: Effect[];
}

export interface JoinResult extends Change {
  /** the person's first connection in the lesson (they just became present) */
  first: boolean;
  /** no participant.joined was claimed for them in the last 6 h (Postgres decides) */
  announce: boolean;
  /** the people present, each as the JSON of its PublicPerson as stored: the welcome frame takes them unparsed */
  people: string[];
  /**
   * Another node has connections in the lesson, at this decision: the presence
   * event must cross the bus. When none has, nobody elsewhere needs it (a node
   * whose arrival registers later gets the people in its welcome).
   */
  remote: boolean;
}

export interface LeaveResult extends Change {
  /** the person's last connection closed (they are no longer present) */
  last: boolean;
  person: PublicPerson | null;
  /** another node has connections left in the lesson (as JoinResult.remote) */
  remote: boolean;
}

export interface ReapedLesson extends Change {
  lessonId: string;
  left: PublicPerson[];
}

export interface TickResult extends Change {
  lessonId: string;
  /** this node claimed the periodic flush of the lesson */
  due: boolean;
  /**
   * Presence is certain up to here (<= now), when this node claimed the flush:
   * the earliest, over the nodes with people in the lesson, of their next
   * lease renewal (a node that died since is reaped with its departures dated
   * then) and of the time each last vouched for its sockets (TickVouch: a
   * half-open socket's departure is dated at its last sign of life + one
   * keepalive cycle). A flush charges no further.
   */
  safeUntil: number;
}

/**
 * What the ticking node vouches for, per lesson of the tick (same order):
 * presence of its sockets there is certain up to `until[i]` (<= now).
 * Kept per lesson and node until the node's next tick.
 */
export interface TickVouch {
  node: string;
  until: number[];
}

export interface JoinInput {
  now: number;
  node: string;
  conn: string;
  person: string;
  info: PublicPerson;
  /** re-registration of a live connection after Redis lost it: no participant.joined */
  rejoin: boolean;
  /**
   * What Postgres knew of the lesson's meter just before (read alongside the
   * bus subscription of a lesson new on this node): used only if Redis has no
   * meter for the lesson, saving the round trips of asking for it.
   */
  seed?: MeterSeed;
}

export interface Presence {
  /** Before serving: whatever makes the first calls as fast as the later ones (loading scripts). */
  warmUp(): Promise<void>;
  join(lessonId: string, input: JoinInput): Promise<JoinResult>;
  /**
   * The connection closed. `at` (default `now`) dates the departure: the
   * socket's last sign of life when the gateway knows it (a half-open socket
   * found by the idle timeout left when it last spoke, not when it was found).
   * undefined when the connection was not registered (e.g. Redis lost it).
   */
  leave(lessonId: string, conn: string, now: number, at?: number): Promise<LeaveResult | undefined>;
  /**
   * Refreshes this node's lease; alive=false means the lease was gone (Redis
   * lost its state, or we were reaped after a stall): re-register. Starts a
   * Redis state's rebuild window when it finds none (src/metering/rules.ts rebuildMs).
   */
  heartbeat(node: string, now: number): Promise<{ alive: boolean; expired: string[] }>;
  /**
   * Removes every connection of a node whose lease expired, once; [] when
   * someone else did or it came back. Departures are dated when the dead
   * node's next renewal was due (rules.ts renewMs), never at the expiry.
   */
  reap(deadNode: string, now: number): Promise<ReapedLesson[]>;
  tick(lessonIds: string[], now: number, vouch?: TickVouch): Promise<TickResult[]>;
  setSession(lessonId: string, sessionId: number, startAt: number, baseMs: number, now: number): Promise<{ ok: boolean; change: Change }>;
  claimEnd(lessonId: string, sessionId: number, now: number): Promise<{ kind: 'end'; meter: MeterState } | { kind: 'busy' | 'orphan' }>;
  /**
   * The lesson was deleted at archivedAt: the meter with its pending end (end it in Postgres), a
   * meter still `starting` (a start pending since before the deletion, paused there: make its
   * session, then archive again), or undefined (nothing to bill).
   */
  archiveEnd(lessonId: string, archivedAt: number, now: number): Promise<MeterState | undefined>;
  clearEnd(lessonId: string, sessionId: number, now: number): Promise<MeterState | null>;
  orphan(lessonId: string, sessionId: number, now: number): Promise<MeterState | undefined>;
  people(lessonId: string): Promise<{ count: number; seq: number; people: PublicPerson[] }>;
  leaveNode(node: string): Promise<void>;
  /**
   * A participant.joined claimed at `at` (JoinResult.announce) that this node
   * could not record: the filter forgets it (if still that claim), so the
   * person's next arrival is announced.
   */
  forgetJoined(lessonId: string, person: string, at: number): Promise<void>;
  /**
   * The pending starts some node could not write (Meter.unstarted), shared by every node, so a
   * node that dies with one takes no retry with it: every node ticks them until their meter is no
   * longer `starting` (the tick's start claim lets one node make each start). At most
   * PENDING_STARTS_MAX listed.
   */
  keepPendingStart(lessonId: string, now: number): Promise<void>;
  dropPendingStart(lessonId: string): Promise<void>;
  pendingStarts(): Promise<string[]>;
}

/** How many shared pending starts a node reads per flush (each is a lesson whose start failed while Postgres was away). */
export const PENDING_STARTS_MAX = 1000;

/** The timing every implementation takes (realtime/timing.ts), and where seeds come from. */
export interface PresenceOptions {
  idleMs: number;
  leaseMs: number;
  flushMs: number;
  /** how long re-registration after a state loss may take before the meter is reconciled */
  graceMs: number;
  /** a pending session start not confirmed within this is taken over by another node */
  startRetryMs: number;
  loadSeed: SeedLoader;
}

/** Reads what Postgres knows of a lesson's meter, for Redis to be seeded with. */
export type SeedLoader = (lessonId: string) => Promise<MeterSeed | undefined>;
