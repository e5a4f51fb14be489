import type { Redis } from '../../src/redis.js';
import type { MeterSeed } from '../../src/metering/meters.js';
import { PARTICIPANT_JOINED_WINDOW_MS, rebuildMs, renewMs } from '../../src/metering/rules.js';
import * as lua from './lua.js';
import { parseMeter as parseMeterFields } from './MeterMachine.js';
import type {
  Change,
  Effect,
  JoinInput,
  JoinResult,
  LeaveResult,
  MeterState,
  Presence,
  PresenceOptions,
  PublicPerson,
  ReapedLesson,
  TickResult,
  TickVouch,
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
  gwReap: lua.REAP,
  gwTick: lua.TICK,
  gwSetSession: lua.SET_SESSION,
  gwClaimEnd: lua.CLAIM_END,
  gwArchiveEnd: lua.ARCHIVE_END,
  gwClearEnd: lua.CLEAR_END,
  gwOrphan: lua.ORPHAN,
  gwPeople: lua.PEOPLE,
  gwLeaveNode: lua.LEAVE_NODE,
} as const;

/**
 * Presence and meter state in Redis, every decision taken by one Lua script
 * (see ./lua.ts). ioredis' defineCommand runs them by EVALSHA and reloads them
 * after a Redis restart (NOSCRIPT), so a restarted Redis needs nothing from us.
 * When Redis has no meter for a lesson, the scripts answer 'seed' and this
 * class retries once with what Postgres knows (readMeterSeed).
 */
export class RedisPresence implements Presence {
  private readonly root: string;
  private readonly run: Record<keyof typeof SCRIPTS, ScriptRunner>;

  constructor(
    private readonly redis: Redis,
    private readonly opts: RedisPresenceOptions,
  ) {
    this.root = opts.namespace ?? 'gw:';
    const r = redis as unknown as Record<string, ScriptRunner>;
    this.run = {} as Record<keyof typeof SCRIPTS, ScriptRunner>;
    for (const [name, source] of Object.entries(SCRIPTS) as [keyof typeof SCRIPTS, string][]) {
      if (typeof r[name] !== 'function') redis.defineCommand(name, { numberOfKeys: 1, lua: source });
      this.run[name] = (...args) => r[name].call(redis, ...args);
    }
  }

  /** Loads the scripts into Redis, so the first arrivals do not each pay a NOSCRIPT round trip. */
  async warmUp(): Promise<void> {
    await Promise.all(Object.values(SCRIPTS).map((source) => this.redis.script('LOAD', source)));
  }

  async join(lessonId: string, input: JoinInput): Promise<JoinResult> {
    const args = (seed: string) => [
      input.now, this.opts.idleMs, input.node, input.conn, input.person, JSON.stringify(input.info),
      PARTICIPANT_JOINED_WINDOW_MS, seed, input.rejoin ? '1' : '0', lessonId,
    ];
    let res = await this.run.gwJoin(this.root, ...args(input.seed ? encodeSeed(input.seed) : ''));
    if (res[0] === 'seed') res = await this.run.gwJoin(this.root, ...args(await this.seed(lessonId)));
    if (res[0] !== 'ok') throw new Error(`presence join: unexpected reply ${String(res[0])}`);
    return {
      first: res[1] === 1,
      announce: res[2] === 1,
      count: Number(res[3]),
      meter: parseMeter(res[4] as Reply),
      effects: res[5] as Effect[],
      people: (res[6] as string[]).map(parsePerson),
    };
  }

  async leave(lessonId: string, conn: string, now: number, at = now): Promise<LeaveResult | undefined> {
    const res = await this.run.gwLeave(this.root, now, this.opts.idleMs, conn, lessonId, at, rebuildMs(this.opts.leaseMs));
    if (res[0] === 'gone') return undefined;
    return {
      last: res[1] === 1,
      person: res[2] ? parsePerson(res[2] as string) : null,
      count: Number(res[3]),
      meter: parseMeter(res[4] as Reply),
      effects: res[5] as Effect[],
    };
  }

  async heartbeat(node: string, now: number): Promise<{ alive: boolean; expired: string[] }> {
    const res = await this.run.gwHeartbeat(this.root, now, node, this.opts.leaseMs, renewMs(this.opts.leaseMs));
    return { alive: res[0] === 1, expired: res.slice(1) as string[] };
  }

  async reap(deadNode: string, now: number): Promise<ReapedLesson[]> {
    const res = await this.run.gwReap(this.root, now, this.opts.idleMs, deadNode);
    return (res as Reply[]).map((r) => ({
      lessonId: r[0] as string,
      count: Number(r[1]),
      meter: parseMeter(r[2] as Reply),
      effects: r[3] as Effect[],
      left: (r[4] as string[]).filter(Boolean).map(parsePerson),
    }));
  }

  async tick(lessonIds: string[], now: number, vouch?: TickVouch): Promise<TickResult[]> {
    if (lessonIds.length === 0) return [];
    const o = this.opts;
    const lessons = lessonIds.flatMap((id, i) => [id, vouch ? String(Math.floor(vouch.until[i])) : '']);
    const res = await this.run.gwTick(this.root, now, o.idleMs, o.flushMs, o.graceMs, o.startRetryMs, rebuildMs(o.leaseMs), vouch?.node ?? '', ...lessons);
    const out: TickResult[] = [];
    for (const r of res as Reply[]) {
      const lessonId = r[0] as string;
      if (r[1] === 'seed') {
        out.push({ lessonId, due: false, count: 0, meter: null, effects: [], safeUntil: now });
        continue;
      }
      out.push({ lessonId, due: r[2] === 1, count: Number(r[3]), meter: parseMeter(r[4] as Reply), effects: r[5] as Effect[], safeUntil: Number(r[6]) });
    }
    return out;
  }

  async setSession(lessonId: string, sessionId: number, startAt: number, baseMs: number, now: number): Promise<{ ok: boolean; change: Change }> {
    const res = await this.run.gwSetSession(this.root, now, lessonId, sessionId, startAt, baseMs);
    if (res[0] === 'gone') return { ok: false, change: { count: 0, meter: null, effects: [] } };
    return { ok: res[0] === 'ok', change: { count: Number(res[1]), meter: parseMeter(res[2] as Reply), effects: [] } };
  }

  async claimEnd(lessonId: string, sessionId: number, now: number) {
    const args = (seed: string) => [now, this.opts.idleMs, lessonId, sessionId, seed, rebuildMs(this.opts.leaseMs)];
    let res = await this.run.gwClaimEnd(this.root, ...args(''));
    if (res[0] === 'seed') res = await this.run.gwClaimEnd(this.root, ...args(await this.seed(lessonId)));
    if (res[0] === 'end') return { kind: 'end' as const, meter: parseMeter(res[1] as Reply)! };
    return { kind: res[0] === 'orphan' ? ('orphan' as const) : ('busy' as const) };
  }

  async archiveEnd(lessonId: string, archivedAt: number, now: number): Promise<MeterState | undefined> {
    const args = (seed: string) => [now, lessonId, archivedAt, seed];
    let res = await this.run.gwArchiveEnd(this.root, ...args(''));
    if (res[0] === 'seed') res = await this.run.gwArchiveEnd(this.root, ...args(await this.seed(lessonId)));
    return res[0] === 'end' ? parseMeter(res[1] as Reply)! : undefined;
  }

  async clearEnd(lessonId: string, sessionId: number, now: number): Promise<MeterState | null> {
    const res = await this.run.gwClearEnd(this.root, now, lessonId, sessionId);
    return res[0] === 'ok' ? parseMeter(res[1] as Reply) : null;
  }

  async orphan(lessonId: string, sessionId: number, now: number): Promise<MeterState | undefined> {
    const args = (seed: string) => [now, lessonId, sessionId, seed, rebuildMs(this.opts.leaseMs)];
    let res = await this.run.gwOrphan(this.root, ...args(''));
    if (res[0] === 'seed') res = await this.run.gwOrphan(this.root, ...args(await this.seed(lessonId)));
    return res[0] === 'ok' ? parseMeter(res[1] as Reply)! : undefined;
  }

  async people(lessonId: string): Promise<{ count: number; seq: number; people: PublicPerson[] }> {
    const res = await this.run.gwPeople(this.root, lessonId);
    return { count: Number(res[0]), seq: Number(res[1]), people: (res[2] as string[]).map(parsePerson) };
  }

  async leaveNode(node: string): Promise<void> {
    await this.run.gwLeaveNode(this.root, node);
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

/** The script's meter array (METER_FIELDS order) as its state (MeterMachine.parseMeter). */
function parseMeter(r: Reply | undefined): MeterState | null {
  if (!r || r.length === 0) return null;
  const f: Record<string, string> = {};
  lua.METER_FIELDS.forEach((name, i) => (f[name] = String(r[i] ?? '')));
  return parseMeterFields(f);
}

function parsePerson(json: string): PublicPerson {
  return JSON.parse(json) as PublicPerson;
}
