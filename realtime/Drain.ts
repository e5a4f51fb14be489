import type { Logger } from '../src/logger.js';
import type { ClientConnection } from './ClientConnection.js';

/**
 * A socket closed by a drain reaches presence as a departure this long after its close (dated at the
 * close): the page reconnects at once to another node, and once it is present there the departure
 * here is not the person's (they stay present, nobody sees them leave and join, a running session
 * does not pause). Someone who does not come back is dated as leaving at the close; but a periodic
 * flush by another node within the grace has charged the running meter up to its time, and charges
 * never go back: such a person may be over-billed by up to the grace (3 s), once.
 */
export const DRAIN_LEAVE_GRACE_MS = 3000;
/** Drain closes go out at most one per this many ms while the budget allows (a node with few sockets drains at once; 1,000 sockets take the whole budget of 10 s, more share it evenly). */
export const DRAIN_PACE_MS = 10;

/** What a drain needs of the gateway. */
export interface DrainedGateway {
  readonly log: Logger;
  /** every socket open on this node */
  connections(): ClientConnection[];
  readonly connectionCount: number;
  /** participant.joined not yet recorded is left to the node the person moves to */
  forgetUnrecorded(): Promise<void>;
  /** resolves once every departure in flight reached presence */
  idle(): Promise<void>;
}

/**
 * Graceful drain before a stop (docs/operations.md, "Drain"): the transport refuses new upgrades
 * (`started`), the sockets here are closed with 1012 `restarting` in random order, paced
 * (`paceCloses`: DRAIN_PACE_MS apart, spread over at most the budget) so the pages reconnect to
 * other nodes without a stampede; each departure reaches presence DRAIN_LEAVE_GRACE_MS later,
 * dated at its close (Gateway.closed). Resolves once every socket is gone and every departure
 * recorded, or at the budget and the grace (the sockets still open then are left to
 * Gateway.close). Timers (heartbeat, flush) keep running meanwhile.
 */
export class Drain {
  private running: Promise<void> | undefined;
  /** wakes a drain waiting for the last socket */
  private onEmpty: (() => void) | undefined;

  constructor(private readonly gw: DrainedGateway) {}

  /** Whether a drain started: the transport refuses upgrades and /readyz answers 503. */
  get started(): boolean {
    return this.running !== undefined;
  }

  /** The gateway's last socket closed. */
  empty(): void {
    this.onEmpty?.();
  }

  run(budgetMs: number): Promise<void> {
    return (this.running ??= this.drain(budgetMs));
  }

  private async drain(budgetMs: number): Promise<void> {
    const gw = this.gw;
    const conns = gw.connections();
    // random order: a lesson's people do not all move at the same moment, nor the same lessons first on every node
    for (let i = conns.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [conns[i], conns[j]] = [conns[j], conns[i]];
    }
    await gw.forgetUnrecorded(); // before anyone moves to another node
    const spreadMs = Math.min(budgetMs, conns.length * DRAIN_PACE_MS);
    gw.log.info({ connections: conns.length, spread_ms: spreadMs, budget_ms: budgetMs }, 'draining');
    const stopPacing = paceCloses(conns, spreadMs, budgetMs, (conn) => {
      conn.drained = true;
      conn.close('restarting');
    });
    const deadline = sleep(budgetMs + DRAIN_LEAVE_GRACE_MS);
    const empty = new Promise<void>((resolve) => {
      this.onEmpty = resolve;
      if (gw.connectionCount === 0) resolve();
    });
    // every socket gone and every departure handed to presence, or the deadline
    const done = await Promise.race([empty.then(() => gw.idle()).then(() => true), deadline.then(() => false)]);
    stopPacing();
    gw.log.info({ left: gw.connectionCount, on_time: done }, 'drained');
  }
}

/**
 * Closes `conns` in their order, a step at a time, each step timed from the one before: the even
 * gap of `spreadMs` apart (at least DRAIN_PACE_MS while the budget holds one close per pace).
 * Timers set at fixed offsets from the start would all fire together after a stalled event loop:
 * a burst of reconnects exactly when the node is overloaded. After a stall the later gaps shrink,
 * to half at the least, only as far as the rest need to fit in `budgetMs`; a step that would fall
 * past it is not taken (its sockets are left to Gateway.close). A timer fires a millisecond after
 * the last at best, so a spread with more sockets than milliseconds closes several to a step.
 * Returns what stops the pacing.
 */
function paceCloses<T extends { state: string }>(conns: T[], spreadMs: number, budgetMs: number, close: (conn: T) => void): () => void {
  const perStep = Math.max(1, Math.ceil(conns.length / Math.max(1, spreadMs)));
  const steps = Math.ceil(conns.length / perStep);
  const gapMs = steps > 1 ? spreadMs / (steps - 1) : 0;
  const endAt = performance.now() + budgetMs;
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  const step = (): void => {
    for (let made = 0; made < perStep && next < conns.length; next++) {
      // one closed meanwhile (its person left) does not reconnect: nothing to pace
      if (conns[next].state === 'closed') continue;
      close(conns[next]);
      made++;
    }
    const stepsLeft = Math.ceil((conns.length - next) / perStep);
    if (stepsLeft === 0) return;
    const now = performance.now();
    const delay = Math.max(gapMs / 2, Math.min(gapMs, (endAt - now) / stepsLeft));
    if (delay <= endAt - now) timer = setTimeout(step, delay);
  };
  timer = setTimeout(step, 0);
  return () => clearTimeout(timer);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());
