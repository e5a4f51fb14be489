/**
 * The business rules of metering, stated once. Everything that decides who is
 * billed for what, and when a session starts or ends, takes its value from
 * here; docs/metering.md explains the rules in prose.
 *
 * Repeated elsewhere, and only by taking the value from here:
 * - realtime/presence/lua.ts (the atomic implementation in Redis): the
 *   two-person rule is generated into the script from METERED_PEOPLE; the idle
 *   end, the participant.joined window, the lease and the rebuild window arrive
 *   as ARGV from these constants and the settings.
 * - realtime/presence/MeterMachine.ts (the same transitions in TypeScript,
 *   used by InMemoryPresence and to read the Redis hash).
 * - src/metering/meters.ts (SQL): the idle and orphan sweeps take their cut-off
 *   as a parameter (now - SESSION_IDLE_SECONDS, now - orphanMs): no literal.
 * - src/metering/participants.ts (SQL): the 6-hour window is a parameter.
 */

/**
 * The two-person rule: a lesson is metered while at least this many distinct
 * people (link user_hash: two tabs of one person are one person) are present.
 * A teacher alone meters nothing. Reaching it starts a session (or resumes
 * the running one); falling below it pauses metering.
 */
export const METERED_PEOPLE = 2;

/**
 * The idle end: a session ends when nobody has been present for
 * SESSION_IDLE_SECONDS (this default; tests set 2). `ended_at` is the moment
 * the lesson became empty, not the end of the wait. Whoever notices first
 * applies it: the sweeper (findIdleSessions, Lua claim_end) or the next arrival
 * (Lua on_count, MeterMachine.onCount).
 */
export const SESSION_IDLE_SECONDS_DEFAULT = 300;

/** Whether a lesson empty since `emptySince` has waited out the idle end at `now` (ms). */
export function idleEndDue(emptySince: number, now: number, idleMs: number): boolean {
  return now - emptySince >= idleMs;
}

/**
 * participant.joined goes out at most once per this window per person and
 * lesson, across reconnects, tabs and nodes (Redis filters, Postgres decides).
 */
export const PARTICIPANT_JOINED_WINDOW_MS = 6 * 3600 * 1000;

/**
 * The flush interval (GATEWAY_METER_FLUSH_SECONDS) does not change what is
 * billed: metering is exact to the millisecond in the meter and floored once
 * per session. It is how far `GET /balance` may lag a running lesson, and the
 * period at which a node vouches for its running lessons in Postgres (the
 * snapshot heartbeat the orphan rule reads). Must stay under 10 s.
 */
export const FLUSH_SECONDS_MAX = 9;

/**
 * The orphan rule: a running session that no gateway node has vouched for
 * (snapshot heartbeat) for this long, while nobody is present in Redis, lost
 * every process that held it. Its metering stops at the last confirmed
 * presence (never later: no downtime is billed) and the idle end follows from
 * there. Long enough for three missed flushes, a lease and two heartbeats, so
 * that a node that is merely slow is never taken for dead.
 */
export function orphanMs(flushMs: number, leaseMs: number): number {
  return 3 * flushMs + leaseMs + 2 * renewMs(leaseMs);
}

/**
 * A node renews its lease this often (a third of it). A node that does not
 * renew within its lease is dead: its people leave, dated when its next
 * renewal was due (the last renewal plus this): it was alive at the last
 * renewal and, had it lived past the next, it would have renewed. That bounds
 * the over-count by one renewal interval and never under-counts.
 */
export function renewMs(leaseMs: number): number {
  return Math.round(leaseMs / 3);
}

/**
 * After Redis lost its state (restart, flush), the gateways' live sockets are
 * the truth and every live node re-registers them within one renewal of
 * seeing its lease gone. For this long after a Redis state began (the
 * `epoch` key), nothing may decide that a lesson is empty: no orphan stop, no
 * idle end, no reconciliation of a meter rebuilt from Postgres. A lease is
 * the natural bound: a node that has not renewed within a lease is dead
 * anyway.
 */
export function rebuildMs(leaseMs: number): number {
  return leaseMs;
}
