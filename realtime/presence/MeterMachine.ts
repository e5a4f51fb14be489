import type { MeterSeed } from '../../src/metering/meters.js';
import { idleEndDue, METERED_PEOPLE } from '../../src/metering/rules.js';
import { METER_FIELDS, RUNS_KEPT } from './lua.js';

/**
 * The meter of a lesson as a state machine: a closed set of states and the
 * named transitions between them (docs/metering.md, "The meter of a lesson").
 *
 *             start (2 present, no session)            bindSession
 *   idle ─────────────────────────────────► starting ───────────────► running
 *    ▲                                       │ pause/resume             │ ▲
 *    │ end (idle wait over, archive)         ▼                    pause │ │ resume
 *    └────────────────────────────────────────────────────────────── paused
 *
 * Orthogonal to the state: `emptySince` (nobody present since; `empty` and
 * `occupied` transitions) and `pendingEnd` (a session ended by the rules whose
 * end is still to be written in Postgres; set by the end, cleared by
 * clearEnd; a new session may start meanwhile, but Meter writes the pending
 * end first).
 *
 * Two implementations follow it: realtime/presence/lua.ts (atomic, in Redis;
 * its functions are named after these) and the functions below (used by
 * InMemoryPresence). test/realtime/presenceSuite.ts runs the same suite
 * against both, which is what proves they agree. parseMeterValues is the one place
 * the Redis hash becomes a MeterState.
 */
interface Common {
  /** hybrid clock max(seq + 1, now ms): orders presence events and snapshots */
  seq: number;
  /** nobody present since (ms), null while someone is */
  emptySince: number | null;
  /** most people at once in this session */
  peopleMax: number;
  pendingEnd: PendingEnd | null;
  /** last periodic flush claimed (one node per interval) */
  flushAt: number | null;
  /** the meter was rebuilt from Postgres then (Redis had lost it), until settled */
  seededAt: number | null;
  /** latest departure, reported while rebuilding, of a connection Redis had lost (lostDeparture) */
  goneAt: number | null;
  /**
   * The last RUNS_KEPT runs pauses ended in this session, oldest first (kept through resumes): a
   * deletion noticed after them (a missed notice) takes back what they ran past archived_at
   * (cutAfter). Their starts and their ends, comma-separated, as the hash holds them (run_from,
   * run_to): read only by that cut (runsOf), not on every parse. '': none yet.
   */
  runFrom: string;
  runTo: string;
}

/** A stretch of metering a pause ended: from its start to the pause (ms). */
export interface Run {
  from: number;
  to: number;
}

/** No runs kept (a new session, or after a cut). */
const NO_RUNS = { runFrom: '', runTo: '' } as const;

/** The runs a meter keeps, oldest first. */
export function runsOf(m: Pick<Common, 'runFrom' | 'runTo'>): Run[] {
  if (!m.runFrom || !m.runTo) return [];
  const fs = m.runFrom.split(',');
  const ts = m.runTo.split(',');
  const out: Run[] = [];
  for (let i = 0; i < fs.length && i < ts.length; i++) out.push({ from: Number(fs[i]), to: Number(ts[i]) });
  return out;
}

/** The runs with one more at the end, the oldest dropped past RUNS_KEPT (lua.ts pause). */
function withRun(m: Pick<Common, 'runFrom' | 'runTo'>, run: Run): Pick<Common, 'runFrom' | 'runTo'> {
  const append = (list: string, v: number) => (list ? [...list.split(','), String(v)] : [String(v)]).slice(-RUNS_KEPT).join(',');
  return { runFrom: append(m.runFrom, run.from), runTo: append(m.runTo, run.to) };
}

/** A session the rules ended, to be written to Postgres (finishSession), then cleared. */
export interface PendingEnd {
  sessionId: number;
  /** its final metered whole seconds */
  seconds: number;
  /** when those seconds were reached (the charge's time) */
  chargeAt: number;
  /** its ended_at: when the lesson became empty, or archived_at */
  endAt: number;
}

/** No session: fewer than two people since the last end (or ever). */
export interface Idle extends Common {
  state: 'idle';
}
/**
 * Two people are present and the run began at `startAt`, but no session row
 * exists yet: one node creates it (`start` effect) and binds it (bindSession).
 * Metering already counts (`since`), and pauses below two as usual.
 */
export interface Starting extends Common {
  state: 'starting';
  startAt: number;
  /** when a node last took the start (another takes it over after startRetryMs) */
  startClaim: number;
  accMs: number;
  since: number | null;
  pausedAt: number | null;
}
/** A session, metering since `since` (two or more present). */
export interface Running extends Common {
  state: 'running';
  sessionId: number;
  /** metered ms of the session before `since` */
  accMs: number;
  since: number;
}
/** A session, not metering (fewer than two present). */
export interface Paused extends Common {
  state: 'paused';
  sessionId: number;
  accMs: number;
  pausedAt: number | null;
}

export type MeterState = Idle | Starting | Running | Paused;
export type WithSession = Running | Paused;

/**
 * The transitions a presence change can cause, returned to exactly one
 * caller, who applies them in Postgres (realtime/metering/Meter.ts):
 * - start: a session must be created (state became `starting`)
 * - resume: metering runs again (a session, or a pending start, already exists)
 * - pause: metering stopped below two people: charge up to `accMs`
 * - empty / occupied: nobody is present / somebody is again (snapshot only)
 * - ended: the idle wait was over when someone arrived: write `pendingEnd`
 */
export type Transition = 'start' | 'resume' | 'pause' | 'empty' | 'occupied' | 'ended';
export const TRANSITIONS: readonly Transition[] = ['start', 'resume', 'pause', 'empty', 'occupied', 'ended'];

export function assertNever(x: never): never {
  throw new Error(`unexpected ${JSON.stringify(x)}`);
}

/** When metering runs since, or null while it does not. */
export function runningSince(m: MeterState): number | null {
  switch (m.state) {
    case 'idle':
    case 'paused':
      return null;
    case 'starting':
    case 'running':
      return m.since;
    default:
      return assertNever(m);
  }
}

export function sessionOf(m: MeterState): number | null {
  return m.state === 'running' || m.state === 'paused' ? m.sessionId : null;
}

export function accOf(m: MeterState): number {
  return m.state === 'idle' ? 0 : m.accMs;
}

export function pausedAtOf(m: MeterState): number | null {
  switch (m.state) {
    case 'idle':
    case 'running':
      return null;
    case 'starting':
    case 'paused':
      return m.pausedAt;
    default:
      return assertNever(m);
  }
}

/** Metered whole seconds of the meter's session at `now` (the floor is taken over the whole session). */
export function meteredSeconds(m: MeterState, now: number): number {
  const since = runningSince(m);
  return Math.floor((accOf(m) + (since !== null ? Math.max(0, now - since) : 0)) / 1000);
}

// ---- the Redis hash (realtime/presence/lua.ts METER_FIELDS) ------------------

const FIELD = Object.fromEntries(METER_FIELDS.map((name, i) => [name, i])) as Record<(typeof METER_FIELDS)[number], number>;
const num = (v: string | null | undefined): number | null => (v === undefined || v === null || v === '' ? null : Number(v));

/**
 * The meter hash's values in METER_FIELDS order ('' or null for none), as a
 * script returns them, into its state. The only parser of the hash. It runs
 * for every lesson at every flush and for every arrival and departure, so it
 * builds the state and nothing else (no field map, no copies).
 */
export function parseMeterValues(v: ArrayLike<string | null | undefined>): MeterState {
  const seq = num(v[FIELD.seq]) ?? 0;
  const emptySince = num(v[FIELD.empty]);
  const peopleMax = num(v[FIELD.pmax]) ?? 0;
  const endSid = num(v[FIELD.end_sid]);
  const endAt = num(v[FIELD.end_at]);
  const pendingEnd = endSid === null ? null : { sessionId: endSid, seconds: num(v[FIELD.end_cum]) ?? 0, chargeAt: num(v[FIELD.end_charge_at]) ?? endAt!, endAt: endAt! };
  const flushAt = num(v[FIELD.flush_at]);
  const seededAt = num(v[FIELD.seeded_at]);
  const goneAt = num(v[FIELD.gone]);
  const runFrom = v[FIELD.run_from] ?? '';
  const runTo = v[FIELD.run_to] ?? '';
  const sid = num(v[FIELD.sid]);
  const since = num(v[FIELD.since]);
  const accMs = num(v[FIELD.acc]) ?? 0;
  if (sid !== null) {
    return since !== null
      ? { state: 'running', seq, emptySince, peopleMax, pendingEnd, flushAt, seededAt, goneAt, runFrom, runTo, sessionId: sid, accMs, since }
      : { state: 'paused', seq, emptySince, peopleMax, pendingEnd, flushAt, seededAt, goneAt, runFrom, runTo, sessionId: sid, accMs, pausedAt: num(v[FIELD.paused_at]) };
  }
  const startAt = num(v[FIELD.start_at]);
  if (startAt !== null) {
    return { state: 'starting', seq, emptySince, peopleMax, pendingEnd, flushAt, seededAt, goneAt, runFrom, runTo, startAt, startClaim: num(v[FIELD.start_claim]) ?? startAt, accMs, since, pausedAt: num(v[FIELD.paused_at]) };
  }
  return { state: 'idle', seq, emptySince, peopleMax, pendingEnd, flushAt, seededAt, goneAt, runFrom, runTo };
}

// ---- transitions (the same as the Lua functions of the same names) -----------

const bump = (m: MeterState, now: number): MeterState => ({ ...m, seq: Math.max(m.seq + 1, now) });

/** The meter of a lesson Redis had no meter for, from what Postgres knew (readMeterSeed). */
export function seedMeter(s: MeterSeed, now: number, goneAt: number | null = null): MeterState {
  const common: Common = {
    seq: Math.max(s.seq, now),
    emptySince: s.emptySince?.getTime() ?? null,
    peopleMax: 0,
    pendingEnd: null,
    flushAt: null,
    // only a running session has anything to reconcile with the re-registered sockets (settle)
    seededAt: s.sessionId === null ? null : now,
    goneAt,
    ...NO_RUNS,
  };
  if (s.sessionId === null) return { ...common, state: 'idle' };
  const accMs = Math.round(s.accMs);
  return s.runningSince
    ? { ...common, state: 'running', sessionId: s.sessionId, accMs, since: s.runningSince.getTime() }
    : { ...common, state: 'paused', sessionId: s.sessionId, accMs, pausedAt: null };
}

/** pause: metering stops at `at` (running -> paused; a pending start keeps pending, unmetered). */
export function pause(m: MeterState, at: number): MeterState {
  const since = runningSince(m);
  if (since === null) return m;
  const accMs = accOf(m) + Math.max(0, at - since);
  const pausedAt = Math.max(at, since);
  const runs = withRun(m, { from: since, to: pausedAt });
  switch (m.state) {
    case 'running': {
      const { since: _s, ...rest } = m;
      return { ...rest, state: 'paused', accMs, pausedAt, ...runs };
    }
    case 'starting':
      return { ...m, accMs, since: null, pausedAt, ...runs };
    case 'idle':
    case 'paused':
      return m;
    default:
      return assertNever(m);
  }
}

/** start_run: metering runs from `now`: idle -> starting (a `start`), otherwise a `resume`. */
function startRun(m: Idle | Paused | Starting, now: number): { m: MeterState; fx: Transition } {
  switch (m.state) {
    case 'idle':
      return { m: { ...m, state: 'starting', startAt: now, startClaim: now, accMs: 0, since: now, pausedAt: null, peopleMax: 0, ...NO_RUNS }, fx: 'start' };
    case 'paused': {
      const { pausedAt: _, ...rest } = m;
      return { m: { ...rest, state: 'running', since: now }, fx: 'resume' };
    }
    case 'starting':
      return { m: { ...m, since: now }, fx: 'resume' };
    default:
      return assertNever(m);
  }
}

/** pend_end: the session is over at `endAt`; its figures are frozen and the lesson is free for a new one. */
export function pendEnd(m: WithSession, endAt: number): Idle {
  const pausedAt = m.state === 'paused' ? m.pausedAt : null;
  return {
    state: 'idle',
    seq: m.seq,
    emptySince: m.emptySince,
    peopleMax: 0,
    flushAt: m.flushAt,
    seededAt: m.seededAt,
    goneAt: m.goneAt,
    ...NO_RUNS,
    pendingEnd: { sessionId: m.sessionId, seconds: Math.floor(m.accMs / 1000), chargeAt: pausedAt ?? endAt, endAt },
  };
}

/**
 * cut_after: the lesson was deleted at `at` and the deletion is noticed after pauses that ended
 * runs past it (its notice was missed): those runs' time past `at` comes off, and a pause past `at`
 * is dated `at`. The same meter when there is nothing to take back.
 */
function cutAfter<T extends Starting | Running | Paused>(m: T, at: number): T {
  let past = 0;
  for (const run of runsOf(m)) if (run.to > at) past += run.to - Math.max(run.from, at);
  if (past === 0) return m;
  const accMs = Math.max(0, m.accMs - past);
  const paused = 'pausedAt' in m && m.pausedAt !== null && m.pausedAt > at && runningSince(m) === null;
  return { ...m, accMs, ...NO_RUNS, ...(paused ? { pausedAt: at } : {}) };
}

/**
 * on_count: the rules applied when the number of distinct people present goes
 * from `before` to `after` at `at` (a departure may be dated before `now`, at
 * the socket's last sign of life; `now` orders it).
 */
export function onCount(m0: MeterState, before: number, after: number, at: number, now: number, idleMs: number): { m: MeterState; fx: Transition[] } {
  let m = m0;
  const fx: Transition[] = [];
  if (before === 0 && after > 0) {
    // the idle wait is over even if no sweeper has ended the session yet
    if ((m.state === 'running' || m.state === 'paused') && m.emptySince !== null && m.pendingEnd === null && idleEndDue(m.emptySince, now, idleMs)) {
      m = pendEnd(m, m.emptySince);
      fx.push('ended');
    }
    if (m.emptySince !== null) {
      m = { ...m, emptySince: null };
      fx.push('occupied');
    }
  }
  if (before < METERED_PEOPLE && after >= METERED_PEOPLE && m.state !== 'running' && runningSince(m) === null) {
    const r = startRun(m, at);
    m = r.m;
    fx.push(r.fx);
  }
  if (after > m.peopleMax && m.state !== 'idle') m = { ...m, peopleMax: after };
  if (before >= METERED_PEOPLE && after < METERED_PEOPLE && runningSince(m) !== null) {
    m = pause(m, at);
    fx.push('pause');
  }
  if (after === 0 && before > 0) {
    m = { ...m, emptySince: at };
    fx.push('empty');
  }
  return { m: fx.length > 0 ? bump(m, now) : m, fx };
}

/** Someone arrived or left without a transition: the seq still moves (presence events are ordered by it). */
export function touch(m: MeterState, now: number): MeterState {
  return bump(m, now);
}

/**
 * settle (tick): a meter rebuilt from Postgres is reconciled with the live
 * connections once they all had time to re-register (`graceMs` after the seed,
 * and not before the rebuild window of a new Redis state ends), dated when
 * Redis was seeded. Then a pending start not confirmed within `startRetryMs`
 * is handed to the caller again.
 */
export function settle(
  m0: MeterState,
  count: number,
  now: number,
  t: { graceMs: number; rebuildUntil: number; startRetryMs: number },
): { m: MeterState; fx: Transition[] } {
  let m = m0;
  const fx: Transition[] = [];
  const seeded = m.seededAt;
  if (seeded !== null && now >= Math.max(seeded + t.graceMs, t.rebuildUntil)) {
    // at the latest departure reported for a connection Redis had lost, if earlier
    const stop = Math.min(seeded, m.goneAt ?? seeded);
    m = { ...m, seededAt: null, goneAt: null };
    if (count < METERED_PEOPLE && runningSince(m) !== null) {
      m = pause(m, stop);
      fx.push('pause');
    }
    if (count === 0 && m.emptySince === null) {
      m = { ...m, emptySince: stop };
      fx.push('empty');
    }
    if (count >= METERED_PEOPLE && m.state !== 'running' && runningSince(m) === null) {
      const r = startRun(m, now);
      m = r.m;
      fx.push(r.fx);
    }
  }
  if (m.state === 'starting' && now - m.startClaim >= t.startRetryMs) {
    m = { ...m, startClaim: now };
    fx.push('start');
  }
  return { m: fx.length > 0 ? bump(m, now) : m, fx };
}

/** bind_session: the session `sessionId` was created (or adopted, with `baseMs` already metered) for the start at `startAt`. */
export function bindSession(m: MeterState, sessionId: number, startAt: number, baseMs: number, now: number): MeterState | null {
  if (m.state !== 'starting' || m.startAt !== startAt || m.pendingEnd !== null) return null;
  const { startAt: _a, startClaim: _c, since, pausedAt, ...rest } = m;
  const accMs = m.accMs + baseMs;
  const bound: MeterState = since !== null ? { ...rest, state: 'running', sessionId, accMs, since } : { ...rest, state: 'paused', sessionId, accMs, pausedAt };
  return bump(bound, now);
}

/**
 * claim_end: the idle sweeper asks whether session `sessionId` is over.
 * `end` with the pending end, `busy` (someone is there, or not yet, or Redis
 * is rebuilding from the live nodes: `now < rebuildUntil`), or `orphan`
 * (Redis knows another session or none, and nobody is present).
 */
export function claimIdleEnd(
  m: MeterState,
  sessionId: number,
  count: number,
  now: number,
  idleMs: number,
  rebuildUntil: number,
): { kind: 'end'; m: MeterState } | { kind: 'busy' | 'orphan' } {
  if (m.pendingEnd?.sessionId === sessionId) return { kind: 'end', m };
  if (now < rebuildUntil) return { kind: 'busy' };
  if (sessionOf(m) === sessionId) {
    const s = m as WithSession;
    if (count === 0 && s.emptySince !== null && idleEndDue(s.emptySince, now, idleMs)) return { kind: 'end', m: bump(pendEnd(s, s.emptySince), now) };
    return { kind: 'busy' };
  }
  return { kind: count === 0 ? 'orphan' : 'busy' };
}

/**
 * archive: the lesson was deleted; metering stops and the session ends at `at` (archived_at).
 * A start pending since before the deletion (its Postgres write failed or is still on its way)
 * stays pending, paused at `at`: the time before the deletion was metered and is billed once the
 * session is made (`starting`; the caller retries the start, then archives again). A start
 * decided at or after the deletion is dropped.
 */
export function archive(m: MeterState, at: number, now: number): { kind: 'end' | 'none' | 'starting'; m: MeterState } {
  if (m.pendingEnd !== null) return { kind: 'end', m };
  switch (m.state) {
    case 'idle':
      return { kind: 'none', m };
    case 'starting': {
      if (m.startAt < at) {
        const paused = pause(cutAfter(m, at), at);
        return { kind: 'starting', m: paused === m ? m : bump(paused, now) };
      }
      return { kind: 'none', m: { ...common(m), state: 'idle', ...NO_RUNS } };
    }
    case 'running':
    case 'paused': {
      const p = pause(cutAfter(m, at), at) as WithSession;
      // a run resumed after the deletion paused at its own start: the end's charge is dated at the deletion
      const ended = p.state === 'paused' && p.pausedAt !== null && p.pausedAt > at ? { ...p, pausedAt: at } : p;
      return { kind: 'end', m: bump(pendEnd(ended, at), now) };
    }
    default:
      return assertNever(m);
  }
}

/** clear_end: the pending end of `sessionId` is written in Postgres. null: not that session's. */
export function clearEnd(m: MeterState, sessionId: number, now: number): MeterState | null {
  if (m.pendingEnd?.sessionId !== sessionId) return null;
  return bump({ ...m, pendingEnd: null }, now);
}

/**
 * orphan: Postgres has a running session nobody vouched for lately. If nobody
 * is present (and Redis is not rebuilding from the live nodes), metering
 * stops at the last confirmed presence `confirmedAt`, and the lesson counts as
 * empty since then (the idle end follows).
 */
export function claimOrphan(
  m: MeterState,
  sessionId: number,
  count: number,
  confirmedAt: number,
  now: number,
  rebuildUntil: number,
): { kind: 'ok'; m: MeterState } | { kind: 'busy' } {
  if (count > 0 || now < rebuildUntil || sessionOf(m) !== sessionId) return { kind: 'busy' };
  let out = pause(m, confirmedAt);
  if (out.emptySince === null) out = { ...out, emptySince: confirmedAt };
  return { kind: 'ok', m: bump({ ...out, seededAt: null, goneAt: null }, now) };
}

/**
 * lostDeparture: a node reports a departure (at `at`) of a connection Redis
 * no longer has, while Redis is rebuilding from the live nodes: a rebuilt
 * meter remembers the latest, so its settle pauses then (the count only falls
 * while Redis is away: arrivals are refused), not when Redis was seeded.
 * null: nothing to remember (the meter was not rebuilt).
 */
export function lostDeparture(m: MeterState, at: number): MeterState | null {
  if (m.seededAt === null) return null;
  return { ...m, goneAt: Math.max(m.goneAt ?? at, at) };
}

/** Nothing left to remember about an empty lesson without a session (maybe_forget). */
export function forgettable(m: MeterState, count: number): boolean {
  return count === 0 && m.state === 'idle' && m.pendingEnd === null;
}

function common(m: MeterState): Common {
  return { seq: m.seq, emptySince: m.emptySince, peopleMax: m.peopleMax, pendingEnd: m.pendingEnd, flushAt: m.flushAt, seededAt: m.seededAt, goneAt: m.goneAt, runFrom: m.runFrom, runTo: m.runTo };
}
