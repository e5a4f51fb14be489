import type { MeterSeed } from '../../src/metering/meters.js';
import { PARTICIPANT_JOINED_WINDOW_MS, rebuildMs, renewMs } from '../../src/metering/rules.js';
import * as M from './MeterMachine.js';
import { PENDING_STARTS_MAX, type Change, type JoinInput, type JoinResult, type LeaveResult, type MeterState, type Presence, type PresenceOptions, type PublicPerson, type ReapedLesson, type TickResult, type TickVouch } from './Presence.js';

interface Lesson {
  /** conn -> node and person */
  conns: Map<string, { node: string; person: string }>;
  /** person -> number of connections */
  people: Map<string, number>;
  info: Map<string, PublicPerson>;
  meter: MeterState | null;
  /** node -> how far it last vouched for its sockets here (l:<lesson>:s) */
  vouched: Map<string, number>;
}

/**
 * Presence in one process: the whole Presence contract without Redis, for
 * unit tests of the gateway core and a single-node laptop mode. Every method
 * does its work synchronously once it has what it awaited (a seed from
 * Postgres), so calls are atomic as the Lua scripts are; the meter follows the
 * same state machine (MeterMachine.ts). Each method names the script it mirrors
 * (realtime/presence/lua.ts); test/realtime/presenceSuite.ts runs the same
 * suite against both implementations.
 */
export class InMemoryPresence implements Presence {
  private readonly lessons = new Map<string, Lesson>();
  /** node -> lease expiry and when its next renewal is due */
  private readonly nodes = new Map<string, { expiry: number; due: number }>();
  /** node -> "lesson conn" */
  private readonly nodeConns = new Map<string, Set<string>>();
  /** lesson -> person -> ms of the last participant.joined (a filter; Postgres decides) */
  private readonly joined = new Map<string, Map<string, number>>();
  /** the shared pending starts (Presence.keepPendingStart): lesson -> when kept */
  private readonly pendingStartsAt = new Map<string, number>();
  /** when this state began (the rebuild window, rules.ts rebuildMs) */
  private epochAt: number | null = null;
  /** lesson -> latest departure reported while rebuilding, before the lesson had a meter again (l:<lesson>:g) */
  private readonly lostDepartures = new Map<string, number>();

  constructor(private readonly opts: PresenceOptions) {}

  async warmUp(): Promise<void> {}

  /** Forgets everything, as a restarted Redis does (tests of the rebuild after a loss). */
  clear(): void {
    this.lessons.clear();
    this.nodes.clear();
    this.nodeConns.clear();
    this.joined.clear();
    this.lostDepartures.clear();
    this.pendingStartsAt.clear();
    this.epochAt = null;
  }

  /** JOIN */
  async join(lessonId: string, input: JoinInput): Promise<JoinResult> {
    const seed = this.lessons.get(lessonId)?.meter ? undefined : (input.seed ?? (await this.seed(lessonId)));
    const { now } = input;
    this.epoch(now);
    const l = this.lesson(lessonId);
    let m = l.meter ?? this.seeded(lessonId, seed!, now);
    let first = false;
    let announce = false;
    let fx: M.Transition[] = [];
    if (!l.conns.has(input.conn)) {
      const before = l.people.size;
      l.conns.set(input.conn, { node: input.node, person: input.person });
      this.nodeSet(input.node).add(`${lessonId} ${input.conn}`);
      const n = (l.people.get(input.person) ?? 0) + 1;
      l.people.set(input.person, n);
      l.info.set(input.person, input.info);
      const r = M.onCount(m, before, l.people.size, now, now, this.opts.idleMs);
      m = r.m;
      fx = r.fx;
      if (n === 1) {
        first = true;
        if (fx.length === 0) m = M.touch(m, now);
      }
      // any arrival, not only a first connection (JOIN: a person moving off a draining node)
      if (!input.rejoin) {
        const joins = this.joined.get(lessonId) ?? new Map<string, number>();
        this.joined.set(lessonId, joins);
        const last = joins.get(input.person);
        if (last === undefined || now - last >= PARTICIPANT_JOINED_WINDOW_MS) {
          joins.set(input.person, now);
          announce = true;
        }
      }
    }
    this.store(lessonId, m);
    return { first, announce, count: l.people.size, meter: m, effects: fx, people: [...l.info.values()].map((p) => JSON.stringify(p)), remote: others(l, input.node) };
  }

  /** LEAVE */
  async leave(lessonId: string, conn: string, now: number, at = now): Promise<LeaveResult | undefined> {
    const rebuilding = now < this.epoch(now) + rebuildMs(this.opts.leaseMs);
    const l = this.lessons.get(lessonId);
    const before = l?.people.size ?? 0;
    const d = l && this.dropConn(lessonId, l, conn);
    if (!l || !d) {
      const when = Math.min(now, at);
      if (rebuilding && l?.meter) l.meter = M.lostDeparture(l.meter, when) ?? l.meter;
      else if (rebuilding && !l?.meter) this.lostDepartures.set(lessonId, Math.max(this.lostDepartures.get(lessonId) ?? when, when));
      return undefined;
    }
    const after = l.people.size;
    const remote = others(l, d.node);
    if (!l.meter) return { last: d.last, person: d.info, count: after, meter: null, effects: [], remote };
    const r = M.onCount(l.meter, before, after, Math.min(now, at), now, this.opts.idleMs);
    const m = d.last && r.fx.length === 0 ? M.touch(r.m, now) : r.m;
    this.saveOrForget(lessonId, l, m);
    return { last: d.last, person: d.info, count: after, meter: m, effects: r.fx, remote };
  }

  /** HEARTBEAT */
  async heartbeat(node: string, now: number): Promise<{ alive: boolean; expired: string[] }> {
    this.epoch(now);
    const alive = this.nodes.has(node);
    this.nodes.set(node, { expiry: now + this.opts.leaseMs, due: now + renewMs(this.opts.leaseMs) });
    const expired = [...this.nodes].filter(([n, v]) => n !== node && v.expiry <= now).map(([n]) => n);
    return { alive, expired };
  }

  /** REAP: departures dated when the dead node's next renewal was due. */
  async reap(deadNode: string, now: number): Promise<ReapedLesson[]> {
    const lease = this.nodes.get(deadNode);
    if (!lease || lease.expiry > now) return [];
    const at = Math.min(now, lease.expiry, lease.due);
    this.nodes.delete(deadNode);
    const byLesson = new Map<string, string[]>();
    for (const member of this.nodeConns.get(deadNode) ?? []) {
      const [lessonId, conn] = member.split(' ');
      byLesson.set(lessonId, [...(byLesson.get(lessonId) ?? []), conn]);
    }
    this.nodeConns.delete(deadNode);
    const out: ReapedLesson[] = [];
    for (const [lessonId, conns] of byLesson) {
      const l = this.lessons.get(lessonId);
      if (!l) {
        out.push({ lessonId, count: 0, meter: null, effects: [], left: [] });
        continue;
      }
      const before = l.people.size;
      const left: PublicPerson[] = [];
      for (const conn of conns) {
        const d = this.dropConn(lessonId, l, conn);
        if (d?.last && d.info) left.push(d.info);
      }
      const after = l.people.size;
      if (!l.meter) {
        out.push({ lessonId, count: after, meter: null, effects: [], left });
        continue;
      }
      const r = M.onCount(l.meter, before, after, at, now, this.opts.idleMs);
      const m = left.length > 0 && r.fx.length === 0 ? M.touch(r.m, now) : r.m;
      this.saveOrForget(lessonId, l, m);
      out.push({ lessonId, count: after, meter: m, effects: r.fx, left });
    }
    return out;
  }

  /** TICK */
  async tick(lessonIds: string[], now: number, vouch?: TickVouch): Promise<TickResult[]> {
    const o = this.opts;
    const rebuildUntil = this.epoch(now) + rebuildMs(o.leaseMs);
    return lessonIds.map((lessonId, i) => {
      const l = this.lessons.get(lessonId);
      if (!l?.meter) return { lessonId, due: false, count: 0, meter: null, effects: [], safeUntil: now };
      if (vouch) l.vouched.set(vouch.node, Math.floor(vouch.until[i]));
      const count = l.people.size;
      const r = M.settle(l.meter, count, now, { graceMs: o.graceMs, rebuildUntil, startRetryMs: o.startRetryMs });
      let m = r.m;
      let due = false;
      if (m.flushAt === null || now - m.flushAt >= o.flushMs - 250) {
        m = { ...m, flushAt: now };
        due = true;
      }
      l.meter = m;
      let safeUntil = now;
      if (due) for (const c of l.conns.values()) safeUntil = Math.min(safeUntil, this.nodes.get(c.node)?.due ?? now, l.vouched.get(c.node) ?? now);
      return { lessonId, due, count, meter: m, effects: r.fx, safeUntil };
    });
  }

  /** SET_SESSION */
  async setSession(lessonId: string, sessionId: number, startAt: number, baseMs: number, now: number): Promise<{ ok: boolean; change: Change }> {
    const l = this.lessons.get(lessonId);
    if (!l?.meter) return { ok: false, change: { count: 0, meter: null, effects: [] } };
    const bound = M.bindSession(l.meter, sessionId, startAt, baseMs, now);
    if (bound) l.meter = bound;
    return { ok: bound !== null, change: { count: l.people.size, meter: l.meter, effects: [] } };
  }

  /** CLAIM_END */
  async claimEnd(lessonId: string, sessionId: number, now: number): Promise<{ kind: 'end'; meter: MeterState } | { kind: 'busy' | 'orphan' }> {
    const seed = this.lessons.get(lessonId)?.meter ? undefined : await this.seed(lessonId);
    const rebuildUntil = this.epoch(now) + rebuildMs(this.opts.leaseMs);
    const l = this.lessons.get(lessonId);
    const m = l?.meter ?? this.seeded(lessonId, seed!, now);
    const r = M.claimIdleEnd(m, sessionId, l?.people.size ?? 0, now, this.opts.idleMs, rebuildUntil);
    if (r.kind !== 'end') return r;
    this.store(lessonId, r.m);
    return { kind: 'end', meter: r.m };
  }

  /** ARCHIVE_END */
  async archiveEnd(lessonId: string, archivedAt: number, now: number): Promise<MeterState | undefined> {
    const seed = this.lessons.get(lessonId)?.meter ? undefined : await this.seed(lessonId);
    const r = M.archive(this.lessons.get(lessonId)?.meter ?? this.seeded(lessonId, seed!, now), archivedAt, now);
    this.store(lessonId, r.m);
    return r.kind === 'none' ? undefined : r.m;
  }

  /** CLEAR_END */
  async clearEnd(lessonId: string, sessionId: number, now: number): Promise<MeterState | null> {
    const l = this.lessons.get(lessonId);
    if (!l?.meter) return null;
    const m = M.clearEnd(l.meter, sessionId, now);
    if (!m) return null;
    this.saveOrForget(lessonId, l, m);
    return m;
  }

  async keepPendingStart(lessonId: string, now: number): Promise<void> {
    if (!this.pendingStartsAt.has(lessonId)) this.pendingStartsAt.set(lessonId, now);
  }

  async dropPendingStart(lessonId: string): Promise<void> {
    this.pendingStartsAt.delete(lessonId);
  }

  async pendingStarts(): Promise<string[]> {
    return [...this.pendingStartsAt].sort((a, b) => a[1] - b[1]).slice(0, PENDING_STARTS_MAX).map(([id]) => id);
  }

  /** FORGET_JOINED */
  async forgetJoined(lessonId: string, person: string, at: number): Promise<void> {
    const joins = this.joined.get(lessonId);
    if (joins?.get(person) === at) joins.delete(person);
  }

  /** ORPHAN */
  async orphan(lessonId: string, sessionId: number, now: number): Promise<MeterState | undefined> {
    const seed = this.lessons.get(lessonId)?.meter ? undefined : await this.seed(lessonId);
    const rebuildUntil = this.epoch(now) + rebuildMs(this.opts.leaseMs);
    const l = this.lessons.get(lessonId);
    const m = l?.meter ?? this.seeded(lessonId, seed!, now);
    const base = (l?.meter ? null : (seed?.confirmedAt?.getTime() ?? null)) ?? m.seededAt ?? now;
    // a departure reported while rebuilding is a later sign of presence than the last heartbeat
    const confirmedAt = Math.max(base, m.goneAt ?? base);
    const r = M.claimOrphan(m, sessionId, l?.people.size ?? 0, confirmedAt, now, rebuildUntil);
    if (r.kind !== 'ok') return undefined;
    this.store(lessonId, r.m);
    return r.m;
  }

  /** PEOPLE */
  async people(lessonId: string): Promise<{ count: number; seq: number; people: PublicPerson[] }> {
    const l = this.lessons.get(lessonId);
    return { count: l?.people.size ?? 0, seq: l?.meter?.seq ?? 0, people: [...(l?.info.values() ?? [])] };
  }

  /** LEAVE_NODE */
  async leaveNode(node: string): Promise<void> {
    this.nodes.delete(node);
    if ((this.nodeConns.get(node)?.size ?? 0) === 0) this.nodeConns.delete(node);
  }

  private epoch(now: number): number {
    this.epochAt ??= now;
    return this.epochAt;
  }

  private lesson(lessonId: string): Lesson {
    let l = this.lessons.get(lessonId);
    if (!l) {
      l = { conns: new Map(), people: new Map(), info: new Map(), meter: null, vouched: new Map() };
      this.lessons.set(lessonId, l);
    }
    return l;
  }

  private nodeSet(node: string): Set<string> {
    let s = this.nodeConns.get(node);
    if (!s) {
      s = new Set();
      this.nodeConns.set(node, s);
    }
    return s;
  }

  /** drop_conn */
  private dropConn(lessonId: string, l: Lesson, conn: string): { last: boolean; info: PublicPerson | null; node: string } | undefined {
    const c = l.conns.get(conn);
    if (!c) return undefined;
    l.conns.delete(conn);
    this.nodeConns.get(c.node)?.delete(`${lessonId} ${conn}`);
    const info = l.info.get(c.person) ?? null;
    const n = (l.people.get(c.person) ?? 0) - 1;
    if (n > 0) {
      l.people.set(c.person, n);
      return { last: false, info, node: c.node };
    }
    l.people.delete(c.person);
    l.info.delete(c.person);
    return { last: true, info, node: c.node };
  }

  /** save_meter */
  private store(lessonId: string, m: MeterState): void {
    this.lesson(lessonId).meter = m;
    this.lostDepartures.delete(lessonId);
  }

  /** maybe_forget */
  private saveOrForget(lessonId: string, l: Lesson, m: MeterState): void {
    if (M.forgettable(m, l.people.size)) this.lessons.delete(lessonId);
    else l.meter = m;
  }

  private async seed(lessonId: string): Promise<MeterSeed> {
    const s = await this.opts.loadSeed(lessonId);
    if (!s) throw new Error(`lesson ${lessonId} not found`);
    return s;
  }

  /** seed_meter: the meter from Postgres, with the departures reported before it existed (forgotten once it is stored: store()). */
  private seeded(lessonId: string, seed: MeterSeed, now: number): MeterState {
    return M.seedMeter(seed, now, this.lostDepartures.get(lessonId) ?? null);
  }
}

/** others: a node other than `node` has a connection in the lesson. */
function others(l: Lesson, node: string): boolean {
  for (const c of l.conns.values()) if (c.node !== node) return true;
  return false;
}
