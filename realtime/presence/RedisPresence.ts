import { isCluster, keySlot, masters, slotTag, type Cluster, type Redis } from '../../src/redis.js';
import type { MeterSeed } from '../../src/metering/meters.js';
import { PARTICIPANT_JOINED_WINDOW_MS, rebuildMs, renewMs } from '../../src/metering/rules.js';
import * as lua from './lua.js';
import { parseMeterValues } from './MeterMachine.js';
import {
  PENDING_STARTS_MAX,
  type Change,
  type Effect,
  type JoinInput,
  type JoinResult,
  type LeaveResult,
  type MeterState,
  type Presence,
  type PresenceOptions,
  type PublicPerson,
  type ReapedLesson,
  type TickResult,
  type TickVouch,
} from './Presence.js';

export interface RedisPresenceOptions extends PresenceOptions {
  /** key namespace under REDIS_KEY_PREFIX */
  namespace?: string;
}

type Reply = (string | number | Reply)[];
type ScriptRunner = (root: string, ...args: (string | number)[]) => Promise<Reply>;

/** The presence scripts, by the command name ioredis runs them under. */
export const SCRIPTS = {
  gwJoin: lua.JOIN,
  gwLeave: lua.LEAVE,
  gwHeartbeat: lua.HEARTBEAT,
  gwReapClaim: lua.REAP_CLAIM,
  gwReapSlot: lua.REAP_SLOT,
  gwReapDone: lua.REAP_DONE,
  gwNsAdd: lua.NS_ADD,
  gwDues: lua.DUES,
  gwTick: lua.TICK,
  gwSetSession: lua.SET_SESSION,
  gwClaimEnd: lua.CLAIM_END,
  gwArchiveEnd: lua.ARCHIVE_END,
  gwClearEnd: lua.CLEAR_END,
  gwOrphan: lua.ORPHAN,
  gwPeople: lua.PEOPLE,
  gwLeaveNode: lua.LEAVE_NODE,
  gwForgetJoined: lua.FORGET_JOINED,
} as const;

/** A reap left unfinished this long (its reaper died) is taken over by another node. */
const REAP_STALE_MS = 10_000;
/** Lessons per TICK call: one script run blocks Redis, so a node's flush is cut into calls of this many. */
const TICK_CHUNK = 200;

/**
 * Presence and meter state in Redis, every decision taken by one Lua script
 * (see ./lua.ts). ioredis' defineCommand runs them by EVALSHA and reloads them
 * after a Redis restart (NOSCRIPT), so a restarted Redis needs nothing from us.
 * When Redis has no meter for a lesson, the scripts answer 'seed' and this
 * class retries once with what Postgres knows (readMeterSeed).
 *
 * On a Redis Cluster each call touches one hash slot: a lesson's scripts that
 * of the lesson (their one key is `<root>{<tag of the lesson's slot>}`), the
 * node scripts `<root>{nodes}`; a tick over many lessons is one call per slot,
 * and a reap is a claim (nodes' slot), one call per slot the dead node had
 * connections in (the node lists them in `ns:<node>` as it joins), and a done.
 * On a single Redis the tag is '' and a tick is one call, as before.
 */
export class RedisPresence implements Presence {
  private readonly root: string;
  private readonly run: Record<keyof typeof SCRIPTS, ScriptRunner>;
  private readonly cluster: boolean;
  /** the key of the node scripts: `<root>` or `<root>{nodes}` */
  private readonly nodeKey: string;
  /** the shared pending starts (Presence.keepPendingStart): a sorted set of lesson ids by when they were kept */
  private readonly startsKey: string;
  /** "<node> <slot tag>" already listed in the node's `ns` set (a cluster only) */
  private readonly nsAdded = new Set<string>();
  private initializing: Promise<void> | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly opts: RedisPresenceOptions,
  ) {
    this.root = opts.namespace ?? 'gw:';
    if (this.root.includes('{')) throw new Error('presence namespace must not contain "{"');
    this.cluster = isCluster(redis);
    this.nodeKey = this.cluster ? `${this.root}{nodes}` : this.root;
    this.startsKey = this.cluster ? `${this.root}{starts}` : `${this.root}starts`;
    const r = redis as unknown as Record<string, ScriptRunner>;
    this.run = {} as Record<keyof typeof SCRIPTS, ScriptRunner>;
    for (const [name, source] of Object.entries(SCRIPTS) as [keyof typeof SCRIPTS, string][]) {
      if (typeof r[name] !== 'function') redis.defineCommand(name, { numberOfKeys: 1, lua: this.source(source) });
      const call: ScriptRunner = (root, ...args) => r[name].call(redis, root, ...args);
      this.run[name] = !this.cluster
        ? call
        : async (root, ...args) => {
            const res = await call(root, ...args);
            // the script started its slot's epoch: the others that are missing start now too (every script's first ARGV is now)
            if (res[res.length - 1] === '!epoch') {
              res.pop();
              await this.initEpochs(Number(args[0]));
            }
            return res;
          };
    }
  }

  /**
   * A cluster only: starts the epoch (lua.ts) of every slot that has none, at `now`. Called when a
   * script found its slot without one: a new cluster, or a master that lost its data (its slots
   * all lost theirs). So every lost slot's rebuild window opens at the first sign of the loss, as
   * the one epoch of a single Redis does; slots that kept theirs are untouched (NX).
   */
  private initEpochs(now: number): Promise<void> {
    return (this.initializing ??= (async () => {
      try {
        const value = String(now);
        const key = (slot: number) => `${this.root}epoch${slotTag(slot)}`;
        // one pipeline per master (a cluster pipeline may span the slots of one master)
        const byMaster = new Map<string, number[]>();
        const slots = (this.redis as Cluster).slots;
        for (let slot = 0; slot < 16384; slot++) {
          const node = slots[slot]?.[0] ?? '';
          let list = byMaster.get(node);
          if (!list) byMaster.set(node, (list = []));
          list.push(slot);
        }
        await Promise.all(
          [...byMaster].map(async ([node, list]) => {
            if (node) {
              const pipe = this.redis.pipeline();
              for (const slot of list) pipe.set(key(slot), value, 'NX');
              const res = await pipe.exec().catch(() => null);
              if (res && res.every(([err]) => !err)) return;
            }
            // slots not known yet, or moving: one command each
            for (let i = 0; i < list.length; i += 1024) await Promise.all(list.slice(i, i + 1024).map((slot) => this.redis.set(key(slot), value, 'NX')));
          }),
        );
      } finally {
        this.initializing = undefined;
      }
    })());
  }

  /** Loads the scripts into Redis, so the first arrivals do not each pay a NOSCRIPT round trip. */
  async warmUp(): Promise<void> {
    const redis = this.redis;
    if (isCluster(redis) && redis.status !== 'ready') {
      // a cluster knows its masters once it has read the slots
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 5_000);
        redis.once('ready', () => (clearTimeout(t), resolve()));
      });
    }
    await Promise.all(masters(this.redis).flatMap((m) => Object.values(SCRIPTS).map((source) => m.script('LOAD', this.source(source)))));
  }

  /**
   * On a cluster the scripts carry `#!lua` (Redis 7 script flags, none): Redis then refuses a call
   * that touches keys of two slots, even on one master, so every call is proven to stay in one slot
   * (a script without it may, for compatibility). A single Redis runs them as before (Redis 6 too).
   */
  private source(lua: string): string {
    return this.cluster ? `#!lua${lua}` : lua;
  }

  /** The slot tag of a lesson's keys ('' on a single Redis). */
  private tagOf(lessonId: string): string {
    return this.cluster ? slotTag(keySlot(lessonId)) : '';
  }

  /** The key a lesson's script is called with (see lua.ts). */
  private key(lessonId: string): string {
    return this.root + this.tagOf(lessonId);
  }

  async join(lessonId: string, input: JoinInput): Promise<JoinResult> {
    const args = (seed: string) => [
      input.now, this.opts.idleMs, input.node, input.conn, input.person, JSON.stringify(input.info),
      PARTICIPANT_JOINED_WINDOW_MS, seed, input.rejoin ? '1' : '0', lessonId,
    ];
    const key = this.key(lessonId);
    if (this.cluster) {
      // before the connection is in: a node that dies after the join is reaped in this slot too
      const tag = this.tagOf(lessonId);
      const listed = `${input.node} ${tag}`;
      if (!this.nsAdded.has(listed)) {
        await this.run.gwNsAdd(this.nodeKey, input.node, tag);
        this.nsAdded.add(listed);
      }
    }
    let res = await this.run.gwJoin(key, ...args(input.seed ? encodeSeed(input.seed) : ''));
    if (res[0] === 'seed') res = await this.run.gwJoin(key, ...args(await this.seed(lessonId)));
    if (res[0] !== 'ok') throw new Error(`presence join: unexpected reply ${String(res[0])}`);
    return {
      first: res[1] === 1,
      announce: res[2] === 1,
      count: Number(res[3]),
      meter: parseMeter(res[4]),
      effects: res[5] as Effect[],
      people: res[6] as string[],
      remote: res[7] === 1,
    };
  }

  async leave(lessonId: string, conn: string, now: number, at = now): Promise<LeaveResult | undefined> {
    const res = await this.run.gwLeave(this.key(lessonId), now, this.opts.idleMs, conn, lessonId, at, rebuildMs(this.opts.leaseMs));
    if (res[0] === 'gone') return undefined;
    return {
      last: res[1] === 1,
      person: res[2] ? parsePerson(res[2] as string) : null,
      count: Number(res[3]),
      meter: parseMeter(res[4]),
      effects: res[5] as Effect[],
      remote: res[6] === 1,
    };
  }

  async heartbeat(node: string, now: number): Promise<{ alive: boolean; expired: string[] }> {
    for (let waited = 0; ; ) {
      const res = await this.run.gwHeartbeat(this.nodeKey, now, node, this.opts.leaseMs, renewMs(this.opts.leaseMs), REAP_STALE_MS);
      if (res[0] === -1) {
        // another node is reaping this one: re-registering now would be undone by the reap
        if (waited >= 5_000) throw new Error('presence heartbeat: a reap of this node is still in progress');
        await new Promise((r) => setTimeout(r, 50));
        waited += 50;
        continue;
      }
      if (res[0] === -2) {
        // its reaper died half-way: finish it, then come back
        await this.reap(node, now);
        continue;
      }
      if (res[0] !== 1) this.nsAdded.clear();
      return { alive: res[0] === 1, expired: res.slice(1) as string[] };
    }
  }

  async reap(deadNode: string, now: number): Promise<ReapedLesson[]> {
    const claim = await this.run.gwReapClaim(this.nodeKey, now, deadNode, REAP_STALE_MS);
    if (claim.length === 0) return [];
    const at = Number(claim[0]);
    const tags = this.cluster ? (claim.slice(1) as string[]) : [''];
    const out: ReapedLesson[] = [];
    for (const tag of tags) {
      const res = await this.run.gwReapSlot(this.root + tag, now, this.opts.idleMs, deadNode, at);
      for (const r of res as Reply[]) {
        out.push({
          lessonId: r[0] as string,
          count: Number(r[1]),
          meter: parseMeter(r[2]),
          effects: r[3] as Effect[],
          left: (r[4] as string[]).filter(Boolean).map(parsePerson),
        });
      }
    }
    await this.run.gwReapDone(this.nodeKey, deadNode);
    return out;
  }

  async tick(lessonIds: string[], now: number, vouch?: TickVouch): Promise<TickResult[]> {
    if (lessonIds.length === 0) return [];
    const o = this.opts;
    // the nodes' renewal times, read once per tick (a flush chunk), not once per script call
    const dues = (await this.run.gwDues(this.nodeKey)) as string[];
    // One call per slot (a single Redis: one) and per TICK_CHUNK lessons. The calls go in waves of
    // at most TICK_CHUNK lessons, one wave after the other, so that other commands (arrivals) get
    // their turn between them. On a single Redis a wave is one call; on a cluster a node's lessons
    // fall into thousands of slots of one or two lessons each, and a wave's calls go out together
    // (auto-pipelined, one write per master) instead of one round trip per slot.
    const groups = new Map<string, (string | number)[]>();
    lessonIds.forEach((id, i) => {
      const key = this.key(id);
      let g = groups.get(key);
      if (!g) groups.set(key, (g = []));
      g.push(id, vouch ? String(Math.floor(vouch.until[i])) : '');
    });
    const head = [now, o.idleMs, o.flushMs, o.graceMs, o.startRetryMs, rebuildMs(o.leaseMs), vouch?.node ?? '', dues.length / 2, ...dues];
    const byLesson = new Map<string, Reply>();
    let wave: Promise<void>[] = [];
    let waveLessons = 0;
    for (const [key, lessons] of groups) {
      for (let i = 0; i < lessons.length; i += 2 * TICK_CHUNK) {
        const args = lessons.slice(i, i + 2 * TICK_CHUNK);
        if (waveLessons + args.length / 2 > TICK_CHUNK && wave.length > 0) {
          await Promise.all(wave);
          wave = [];
          waveLessons = 0;
        }
        waveLessons += args.length / 2;
        wave.push(
          (this.run.gwTick(key, ...head, ...args) as Promise<Reply[]>).then((res) => {
            for (const r of res) byLesson.set(r[0] as string, r);
          }),
        );
      }
    }
    await Promise.all(wave);
    const out: TickResult[] = [];
    for (const id of lessonIds) {
      const r = byLesson.get(id);
      if (!r) continue;
      const lessonId = r[0] as string;
      if (r[1] === 'seed') {
        out.push({ lessonId, due: false, count: 0, meter: null, effects: [], safeUntil: now });
        continue;
      }
      out.push({ lessonId, due: r[2] === 1, count: Number(r[3]), meter: parseMeter(r[4]), effects: r[5] as Effect[], safeUntil: Number(r[6]) });
    }
    return out;
  }

  async setSession(lessonId: string, sessionId: number, startAt: number, baseMs: number, now: number): Promise<{ ok: boolean; change: Change }> {
    const res = await this.run.gwSetSession(this.key(lessonId), now, lessonId, sessionId, startAt, baseMs);
    if (res[0] === 'gone') return { ok: false, change: { count: 0, meter: null, effects: [] } };
    return { ok: res[0] === 'ok', change: { count: Number(res[1]), meter: parseMeter(res[2]), effects: [] } };
  }

  async claimEnd(lessonId: string, sessionId: number, now: number) {
    const args = (seed: string) => [now, this.opts.idleMs, lessonId, sessionId, seed, rebuildMs(this.opts.leaseMs)];
    let res = await this.run.gwClaimEnd(this.key(lessonId), ...args(''));
    if (res[0] === 'seed') res = await this.run.gwClaimEnd(this.key(lessonId), ...args(await this.seed(lessonId)));
    if (res[0] === 'end') return { kind: 'end' as const, meter: parseMeter(res[1])! };
    return { kind: res[0] === 'orphan' ? ('orphan' as const) : ('busy' as const) };
  }

  async archiveEnd(lessonId: string, archivedAt: number, now: number): Promise<MeterState | undefined> {
    const args = (seed: string) => [now, lessonId, archivedAt, seed];
    let res = await this.run.gwArchiveEnd(this.key(lessonId), ...args(''));
    if (res[0] === 'seed') res = await this.run.gwArchiveEnd(this.key(lessonId), ...args(await this.seed(lessonId)));
    return res[0] === 'end' || res[0] === 'starting' ? parseMeter(res[1])! : undefined;
  }

  async clearEnd(lessonId: string, sessionId: number, now: number): Promise<MeterState | null> {
    const res = await this.run.gwClearEnd(this.key(lessonId), now, lessonId, sessionId);
    return res[0] === 'ok' ? parseMeter(res[1]) : null;
  }

  async orphan(lessonId: string, sessionId: number, now: number): Promise<MeterState | undefined> {
    const args = (seed: string) => [now, lessonId, sessionId, seed, rebuildMs(this.opts.leaseMs)];
    let res = await this.run.gwOrphan(this.key(lessonId), ...args(''));
    if (res[0] === 'seed') res = await this.run.gwOrphan(this.key(lessonId), ...args(await this.seed(lessonId)));
    return res[0] === 'ok' ? parseMeter(res[1])! : undefined;
  }

  async people(lessonId: string): Promise<{ count: number; seq: number; people: PublicPerson[] }> {
    const res = await this.run.gwPeople(this.key(lessonId), lessonId);
    return { count: Number(res[0]), seq: Number(res[1]), people: (res[2] as string[]).map(parsePerson) };
  }

  async leaveNode(node: string): Promise<void> {
    await this.run.gwLeaveNode(this.nodeKey, node);
  }

  async forgetJoined(lessonId: string, person: string, at: number): Promise<void> {
    await this.run.gwForgetJoined(this.key(lessonId), lessonId, person, at);
  }

  async keepPendingStart(lessonId: string, now: number): Promise<void> {
    await this.redis.zadd(this.startsKey, 'NX', now, lessonId);
  }

  async dropPendingStart(lessonId: string): Promise<void> {
    await this.redis.zrem(this.startsKey, lessonId);
  }

  async pendingStarts(): Promise<string[]> {
    return this.redis.zrange(this.startsKey, 0, PENDING_STARTS_MAX - 1);
  }

  private async seed(lessonId: string): Promise<string> {
    const s = await this.opts.loadSeed(lessonId);
    if (!s) throw new Error(`lesson ${lessonId} not found`);
    return encodeSeed(s);
  }
}

export function encodeSeed(s: MeterSeed): string {
  const ms = (d: Date | null) => (d ? String(d.getTime()) : '');
  return [s.seq, s.sessionId ?? '', Math.round(s.accMs), ms(s.runningSince), ms(s.emptySince), ms(s.confirmedAt)].join('|');
}

/** The script's meter string (lua.ts meter_out: METER_FIELDS' values joined by '|'; '' for none) as its state. */
function parseMeter(r: unknown): MeterState | null {
  if (typeof r !== 'string' || r === '') return null;
  return parseMeterValues(r.split('|'));
}

function parsePerson(json: string): PublicPerson {
  return JSON.parse(json) as PublicPerson;
}
