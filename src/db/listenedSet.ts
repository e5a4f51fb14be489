import type { Deps } from '../deps.js';
import type { Logger } from '../logger.js';
import { listenSurely } from './listen.js';

/** One entry of a ListenedSet: what it is known by, and until when it can matter (ms). */
export interface Listened {
  key: string;
  until: number;
}

export interface ListenedRules<E extends Listened> {
  /** The channel whose notices announce new entries (sent by the statement that makes them). */
  channel: string;
  /** A notice's entry; undefined for a malformed one: a missed notice, made good by the next read. */
  parse(payload: string, now: number): E | undefined;
  /** Every entry that can still matter, read from Postgres. */
  read(now: Date): Promise<E[]>;
  /**
   * At most this many entries: past it, the expired ones and then the oldest are dropped. Only
   * where forgetting an entry costs no rule (the set spares reads, Postgres decides); without it,
   * only expired entries are dropped, as the set grows.
   */
  max?: number;
}

/**
 * A set that a node keeps current by LISTEN: the rows that still matter are
 * read when the LISTEN connection (re)connects (a notice may have been missed
 * while it was down) and each notice adds its entry. A read adds its rows to
 * the live set rather than replacing it, so a notice heard while a read runs,
 * or committed after the read's snapshot, is never lost; what can no longer
 * matter (`until` passed) is pruned as the set grows and after each read.
 *
 * Every entry heard from Postgres (each notice, each row of a read) is handed
 * to the `onHeard` of `start`: a missed notice's consequences (sockets to
 * close) are made good by the read. `known()` waits for the last read and
 * starts another if it failed, so a check that relies on the set being
 * complete fails as a read would, and the next one tries again.
 */
export class ListenedSet<E extends Listened> {
  private entries = new Map<string, E>();
  /** settles once the last read is in; undefined before start, after stop or after a failed read */
  private loaded: Promise<void> | undefined;
  private sizeAtPrune = 0;
  /** moves on stop: a read that started before it adds nothing */
  private epoch = 0;
  private onHeard: ((entry: E) => void) | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private readonly log: Logger;

  constructor(
    private readonly deps: Pick<Deps, 'sql' | 'clock' | 'log'>,
    private readonly rules: ListenedRules<E>,
  ) {
    this.log = deps.log.child({ component: 'listened-set', channel: rules.channel });
  }

  /** Hears notices from now on; reads the set on each (re)connect of the LISTEN connection, the first included. */
  async start(onHeard?: (entry: E) => void): Promise<void> {
    this.onHeard = onHeard;
    const handle = await listenSurely(
      this.deps.sql,
      this.rules.channel,
      (payload) => {
        let entry: E | undefined;
        try {
          entry = this.rules.parse(payload, this.now());
        } catch {
          // not ours to crash on: a malformed notice is a missed one
        }
        if (!entry) return;
        this.add(entry);
        this.onHeard?.(entry);
      },
      () => {
        this.read().catch((err: Error) => this.log.warn({ err: err.message }, 'not read again: the next check or reconnect reads it'));
      },
      this.deps.log,
    );
    this.unlisten = handle.unlisten;
    // postgres.js calls onlisten for the first LISTEN too: this only starts a read if it did not
    this.loaded ??= this.read();
  }

  async stop(): Promise<void> {
    this.epoch++;
    await this.unlisten?.();
    this.unlisten = undefined;
    this.onHeard = undefined;
    this.entries.clear();
    this.sizeAtPrune = 0;
    this.loaded = undefined;
  }

  /** An entry this node made itself: known at once, whatever the notice's timing (not handed to onHeard). */
  add(entry: E): void {
    const had = this.entries.get(entry.key);
    if (had && had.until >= entry.until) return;
    this.entries.set(entry.key, entry);
    const size = this.entries.size;
    if (this.rules.max !== undefined && size > this.rules.max) this.prune(this.rules.max);
    else if (size > 2 * this.sizeAtPrune + 1_000) this.prune();
  }

  /** What this node knows now, complete or not (see known()). */
  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** Settles once the last read is in (reading again if it failed: rejected if that fails too). */
  known(): Promise<void> {
    return (this.loaded ??= this.read());
  }

  private read(): Promise<void> {
    const epoch = this.epoch;
    const done = this.rules.read(this.deps.clock.now()).then(
      (rows) => {
        if (epoch !== this.epoch) return;
        for (const row of rows) this.add(row);
        this.prune();
        for (const row of rows) this.onHeard?.(row);
      },
      (err: unknown) => {
        if (this.loaded === done) this.loaded = undefined;
        throw err;
      },
    );
    done.catch(() => undefined); // handled where it is awaited
    this.loaded = done;
    return done;
  }

  /** Drops what can no longer matter, then (past `max`) the oldest entries. */
  private prune(max = Infinity): void {
    const now = this.now();
    for (const [key, entry] of this.entries) if (entry.until <= now) this.entries.delete(key);
    while (this.entries.size > max) this.entries.delete(this.entries.keys().next().value!);
    this.sizeAtPrune = this.entries.size;
  }

  private now(): number {
    return this.deps.clock.now().getTime();
  }
}
