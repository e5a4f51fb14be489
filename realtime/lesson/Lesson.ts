import type { ClientConnection } from '../ClientConnection.js';
import type { Bus } from '../bus/Bus.js';
import type { Envelope, Outgoing } from '../bus/LessonBus.js';
import type { MeterMarks } from '../metering/Meter.js';
import { TokenBucket } from '../lib/TokenBucket.js';
import type { CloseCodeName } from '../protocol/closeCodes.js';
import type { Logger } from '../../src/logger.js';

/**
 * Delivery to the connections of a lesson on this node. The uWS transport
 * provides one built on uWS topics (the fan-out loop runs in C++); without
 * it the lesson loops over its connections.
 */
export interface Fanout {
  /** the connection starts receiving its lesson's frames */
  subscribe(conn: ClientConnection): void;
  publish(lessonId: string, frame: string, except?: ClientConnection): void;
}

/** One person's open sockets in the lesson on this node, oldest first, and what they share. */
export interface LocalPerson {
  readonly conns: ClientConnection[];
  /** the person's cursor budget on this node, whatever socket the cursor came on */
  readonly cursor: TokenBucket;
}

export interface PersonLimits {
  /** GATEWAY_MAX_SOCKETS_PER_PERSON: past it the person's oldest sockets close (4409) */
  maxSockets: number;
  /** GATEWAY_PERSON_CURSORS_PER_SECOND and _BURST: a pointer at 30 fps */
  cursorRate: number;
  cursorBurst: number;
}

/** A slot of feature state on a lesson, typed by its key (see `lessonKey`). */
export interface LessonKey<T> {
  readonly name: string;
  /** phantom: carries T */
  readonly _t?: T;
}
export const lessonKey = <T>(name: string): LessonKey<T> => ({ name });

/**
 * Frames kept to replay to connections still registering, at most this many, and only while one
 * of the lesson's connections here is registering; a lesson where nobody is arriving keeps none.
 * - presence frames, by their Redis seq: an arrival gets those newer than its welcome's seq (a
 *   frame delivered while nobody registered was decided in Redis before any later registration, so
 *   no later welcome can be older than it);
 * - the other frames for everyone or for one person (chat lines, media states, a teacher's mute),
 *   not the ephemeral ones (cursors, strokes): an arrival gets those delivered here after it
 *   arrived. Its welcome was read (chat history, media states) while it registered, so such a frame
 *   may be in the welcome as well: pages keep chat lines by id and media states by `v`
 *   (docs/protocol.md). Without this an arrival missed every line sent while it registered.
 */
const KEPT_FRAMES = 64;

/** A frame kept for connections still registering (see KEPT_FRAMES). */
interface Kept {
  /** order of keeping, compared with an arrival's mark */
  mark: number;
  frame: string;
  /** a presence frame's Redis seq */
  seq?: number;
  exceptPerson?: string;
  toPerson?: string;
  toConn?: string;
}
/** How long a lesson remembers a close command it heard, to catch a connection whose upgrade was past the check. */
const HEARD_CLOSE_MS = 60_000;
const NONE: readonly ClientConnection[] = [];

/** The envelope of a frame for everyone on the other nodes: `ephemeral` ones are never kept for arrivals (KEPT_FRAMES). */
export const frameEnvelope = (text: string, opts: { exceptPerson?: string; ephemeral?: boolean }): Outgoing => ({
  kind: opts.ephemeral ? 'ephemeral' : 'frame',
  exceptPerson: opts.exceptPerson,
  payload: text,
});

/** Counts frames written to sockets (GatewayMetrics.messageOut); a no-op without METRICS_PORT. */
export type CountOut = (type: string, count: number) => void;

const TYPE_PREFIX = '{"type":"';
/** Server frame types seen so far, each with the prefix that identifies it: no string is cut per frame. */
const knownTypes: { type: string; probe: string }[] = [];
/**
 * The protocol type of a frame we built (`{"type":"cursor",...`), without allocating: the frame is
 * compared with the prefixes of the types seen before; a new one is cut once (at most 64, then `other`).
 */
export function frameType(frame: string): string {
  for (const k of knownTypes) if (frame.startsWith(k.probe)) return k.type;
  if (!frame.startsWith(TYPE_PREFIX) || knownTypes.length >= 64) return 'other';
  const end = frame.indexOf('"', TYPE_PREFIX.length);
  if (end < 0 || end - TYPE_PREFIX.length > 32) return 'other';
  const type = frame.slice(TYPE_PREFIX.length, end);
  knownTypes.push({ type, probe: `${TYPE_PREFIX}${type}"` });
  return type;
}

/**
 * One lesson on one node: the only per-lesson registry of the gateway.
 *
 * It owns the lesson's sockets here (and each person's sockets: the socket
 * cap and the cursor budget are per person), its subscription to
 * the lesson's one bus channel (open while the lesson has sockets here), and
 * the state the features keep for it (`get`/`set`, e.g. the board's feed and
 * fan-out). Features address the lesson or one person through it; whatever
 * goes to other nodes goes in one envelope on one channel (bus/LessonBus.ts).
 *
 * Life: the Gateway opens it with its first socket (`ready` settles once the
 * bus subscription and every feature's `onLessonOpen` are done, before any of
 * its sockets gets `welcome`) and closes it with its last (unsubscribe, the
 * features' `onLessonClose`). Presence and metering across nodes are not here
 * (Presence, Meter); what this node's Meter remembers of the lesson is (`meterMarks`).
 */
export class Lesson {
  readonly conns = new Set<ClientConnection>();
  private readonly people = new Map<string, LocalPerson>();
  /**
   * Whether another node may have people in this lesson: ephemeral frames
   * (cursors, strokes) go to the bus only then. Set by a publish that reached
   * more than our own subscription, or by anything heard from another node;
   * cleared by a publish that reached only us.
   */
  remoteListeners = true;
  /** settles once the bus subscription and the features' onLessonOpen are done; rejects if one failed */
  ready: Promise<void> = Promise.resolve();
  closed = false;
  private readonly kept: Kept[] = [];
  /** the mark of the last frame kept */
  private marks = 0;
  /**
   * Connections here still registering, each with the mark when it arrived; only while someone
   * is (an empty Map is about 200 B, and most lessons have nobody arriving).
   */
  private arriving: Map<ClientConnection, number> | undefined;
  private readonly slots = new Map<string, unknown>();
  /** made at the first close heard (most lessons hear none: an empty Map costs about 200 B) */
  private heardCloses: Map<string, { code: CloseCodeName; at: number }> | undefined;
  /** what the Meter remembers of the lesson (Meter.marksOf); made at its first write */
  meterMarks: MeterMarks | undefined;
  /** the lesson's session ran at the last flush (the sessions-running gauge) */
  meterRunning = false;

  constructor(
    readonly id: string,
    private readonly bus: Bus,
    private readonly limits: PersonLimits,
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly fanout?: Fanout,
    /** envelopes of kinds the core does not know: the features' (Gateway routes them) */
    private readonly onFeatureEnvelope?: (lesson: Lesson, e: Envelope) => void,
    private readonly countOut?: CountOut,
  ) {}

  // ---- feature state -------------------------------------------------------

  get<T>(key: LessonKey<T>): T | undefined {
    return this.slots.get(key.name) as T | undefined;
  }

  set<T>(key: LessonKey<T>, value: T): void {
    this.slots.set(key.name, value);
  }

  // ---- sockets and people --------------------------------------------------

  /** Adds a socket; returns the person's oldest sockets beyond the cap, for the caller to close. */
  add(conn: ClientConnection, now: number): ClientConnection[] {
    this.conns.add(conn);
    if (conn.state === 'admitting') (this.arriving ??= new Map()).set(conn, this.marks);
    let p = this.people.get(conn.person.id);
    // a person's first socket: an array of exactly one (an empty one grown by push reserves 17 slots)
    if (!p) this.people.set(conn.person.id, (p = { conns: [conn], cursor: new TokenBucket(this.limits.cursorRate, this.limits.cursorBurst, now) }));
    else p.conns.push(conn);
    return p.conns.length > this.limits.maxSockets ? p.conns.slice(0, p.conns.length - this.limits.maxSockets) : [];
  }

  /** Removes a socket; true when it was the lesson's last one here. */
  remove(conn: ClientConnection): boolean {
    if (!this.conns.delete(conn)) return this.conns.size === 0;
    this.arrived(conn);
    const p = this.people.get(conn.person.id);
    if (p) {
      const i = p.conns.indexOf(conn);
      if (i >= 0) p.conns.splice(i, 1);
      if (p.conns.length === 0) this.people.delete(conn.person.id);
    }
    return this.conns.size === 0;
  }

  person(personId: string): LocalPerson | undefined {
    return this.people.get(personId);
  }

  /** Someone is present here (present().length > 0 without the array: every flush asks it of every lesson). */
  hasPresent(): boolean {
    for (const c of this.conns) if (c.state === 'present') return true;
    return false;
  }

  present(): ClientConnection[] {
    const out: ClientConnection[] = [];
    for (const c of this.conns) if (c.state === 'present') out.push(c);
    return out;
  }

  // ---- addressing: here and on every node ----------------------------------

  /**
   * A frame for everyone present on every node: `except` skips one local
   * socket (usually the sender), `exceptPerson` every socket of that person
   * (here and on the other nodes); `ephemeral` frames skip the bus while no
   * other node is known to listen.
   */
  broadcast(text: string, opts: { except?: ClientConnection; exceptPerson?: string; ephemeral?: boolean } = {}): void {
    if (!opts.ephemeral) this.keep({ frame: text, exceptPerson: opts.exceptPerson });
    if (opts.exceptPerson) this.deliverExceptPerson(text, opts.exceptPerson, opts.except);
    else this.deliver(text, opts.except);
    if (opts.ephemeral && !this.remoteListeners) return;
    this.publish(frameEnvelope(text, opts), true);
  }

  /**
   * A presence frame (with its Redis seq) for everyone, remembered here for
   * late registrants; `exceptPerson` skips that person's sockets on every node
   * (a re-registered person is not told that they joined). `remote` false:
   * presence found no other node with connections in the lesson when it
   * decided the event, so it stays off the bus (a node whose arrival registers
   * later has the people in its welcome), and ephemeral frames skip the bus
   * until another node is heard from.
   */
  broadcastPresence(seq: number, frame: string, opts: { except?: ClientConnection; exceptPerson?: string; remote?: boolean } = {}): void {
    this.deliverPresence(seq, frame, opts.except, opts.exceptPerson);
    if (opts.remote === false) {
      this.remoteListeners = false;
      return;
    }
    this.publish({ kind: 'presence', seq, exceptPerson: opts.exceptPerson, payload: frame }, true);
  }

  /** A frame for one person's sockets (or one connection of theirs, by id) on every node. */
  toPerson(personId: string, frame: string, toConn?: string): void {
    this.keep({ frame, toPerson: personId, toConn });
    this.deliverToPerson(personId, frame, toConn);
    this.publish({ kind: 'person', toPerson: personId, toConn, payload: frame });
  }

  /** Closes one person's sockets on every node (and those about to be admitted: `heardClose`). */
  closePerson(personId: string, code: CloseCodeName): void {
    this.closeLocalPerson(personId, code);
    this.publish({ kind: 'close', toPerson: personId, payload: code });
  }

  /** Whether a close of this person with this code was heard in the last minute (a removal racing an upgrade). */
  heardClose(personId: string, code: CloseCodeName): boolean {
    const h = this.heardCloses?.get(personId);
    return !!h && h.code === code && this.now() - h.at < HEARD_CLOSE_MS;
  }

  /** A feature's envelope to the other nodes (kind is the feature's, e.g. `board`). */
  publish(e: Outgoing, learn = false): void {
    this.bus.publish(this.id, e).then(
      (receivers) => {
        if (learn) this.remoteListeners = receivers > 1;
      },
      (err) => this.log.warn({ err: (err as Error).message, lesson_id: this.id, kind: e.kind }, 'bus publish failed'),
    );
  }

  /** An envelope from another node. */
  receive(e: Envelope): void {
    this.remoteListeners = true;
    switch (e.kind) {
      case 'frame':
        this.keep({ frame: e.payload, exceptPerson: e.exceptPerson });
      // falls through
      case 'ephemeral':
        if (e.exceptPerson) this.deliverExceptPerson(e.payload, e.exceptPerson);
        else this.deliver(e.payload);
        return;
      case 'presence':
        this.deliverPresence(e.seq ?? 0, e.payload, undefined, e.exceptPerson);
        return;
      case 'person':
        if (!e.toPerson) return;
        this.keep({ frame: e.payload, toPerson: e.toPerson, toConn: e.toConn });
        this.deliverToPerson(e.toPerson, e.payload, e.toConn);
        return;
      case 'close':
        if (e.toPerson) this.closeLocalPerson(e.toPerson, e.payload as CloseCodeName);
        return;
      case 'hello':
        return;
      default:
        this.onFeatureEnvelope?.(this, e);
    }
  }

  // ---- local delivery ------------------------------------------------------

  /** Delivers to every present connection here except `except`. */
  deliver(frame: string, except?: ClientConnection): void {
    // the sockets here (the ones still admitting are few and short-lived)
    if (this.countOut) this.countOut(frameType(frame), except ? this.conns.size - 1 : this.conns.size);
    if (this.fanout) {
      this.fanout.publish(this.id, frame, except);
      return;
    }
    for (const c of this.conns) if (c !== except && c.state === 'present') c.send(frame);
  }

  /**
   * Everyone here but one person's sockets. The common case, the person's only
   * socket here is the sender (or they have none here), stays one uWS topic
   * publish; only a person with several sockets here costs a loop.
   */
  private deliverExceptPerson(text: string, personId: string, sender?: ClientConnection): void {
    // per cursor frame: a loop that allocates nothing and stops at the first other socket
    let othersHere = false;
    for (const c of this.people.get(personId)?.conns ?? NONE) {
      if (c !== sender && c.state === 'present') {
        othersHere = true;
        break;
      }
    }
    if (!othersHere) return this.deliver(text, sender);
    let n = 0;
    for (const c of this.conns) if (c.state === 'present' && c.person.id !== personId) (c.send(text), n++);
    this.countOut?.(frameType(text), n);
  }

  private deliverPresence(seq: number, frame: string, except?: ClientConnection, exceptPerson?: string): void {
    this.keep({ seq, frame, exceptPerson });
    if (exceptPerson) this.deliverExceptPerson(frame, exceptPerson, except);
    else this.deliver(frame, except);
  }

  private deliverToPerson(personId: string, frame: string, toConn?: string): void {
    let n = 0;
    for (const c of this.people.get(personId)?.conns ?? NONE) if (c.state === 'present' && (!toConn || c.id === toConn)) (c.send(frame), n++);
    if (n > 0) this.countOut?.(frameType(frame), n);
  }

  private closeLocalPerson(personId: string, code: CloseCodeName): void {
    (this.heardCloses ??= new Map()).set(personId, { code, at: this.now() });
    for (const c of [...(this.people.get(personId)?.conns ?? NONE)]) c.close(code);
  }

  /**
   * The connection becomes present: `welcome` first, then what passed while it
   * was registering (KEPT_FRAMES: the presence frames newer than the welcome's
   * seq, since Redis replies and pub/sub messages travel on different
   * connections, and the lesson's other frames for it delivered since it
   * arrived), in one write, then live delivery. All synchronous, so nothing
   * falls in between.
   */
  makePresent(conn: ClientConnection, welcome: string, seq: number): void {
    const from = this.arriving?.get(conn) ?? this.marks;
    conn.state = 'present';
    conn.sendAll(() => {
      conn.send(welcome);
      for (const k of this.kept) if (missed(k, conn, seq, from)) conn.send(k.frame);
    });
    this.countOut?.('welcome', 1);
    this.arrived(conn);
    this.fanout?.subscribe(conn);
  }

  /** How many frames it keeps for arrivals still registering (tests). */
  keptFrames(): number {
    return this.kept.length;
  }

  /** Keeps a frame for the connections still registering; keeps nothing while none is. */
  private keep(k: Omit<Kept, 'mark'>): void {
    if (!this.arriving) return;
    this.kept.push({ mark: ++this.marks, ...k });
    if (this.kept.length > KEPT_FRAMES) this.kept.shift();
  }

  /** The connection is no longer registering (present, or gone); the last one takes the kept frames along. */
  private arrived(conn: ClientConnection): void {
    if (!this.arriving?.delete(conn) || this.arriving.size > 0) return;
    this.arriving = undefined;
    this.kept.length = 0;
  }
}

/** Whether a kept frame is one the connection would have had, had it been present (Lesson.makePresent). */
function missed(k: Kept, conn: ClientConnection, welcomeSeq: number, arrivedMark: number): boolean {
  if (k.seq !== undefined) return k.seq > welcomeSeq && k.exceptPerson !== conn.person.id;
  if (k.mark <= arrivedMark) return false;
  if (k.toPerson !== undefined) return k.toPerson === conn.person.id && (!k.toConn || k.toConn === conn.id);
  return k.exceptPerson !== conn.person.id;
}
