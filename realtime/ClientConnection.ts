import { performance } from 'node:perf_hooks';
import type { ResolvedLink } from '../src/domain/links.js';
import { CloseCode, CloseReason, type CloseCodeName } from './protocol/closeCodes.js';
import { errorFrame, type ErrorCode } from './protocol/serverMessages.js';
import type { PublicPerson } from './presence/Presence.js';
import { TokenBucket } from './lib/TokenBucket.js';

/** The few things the gateway needs from a socket; uWS, or a plain object in tests. */
export interface SocketLike {
  /** 1 sent, 0 buffered (backpressure), 2 dropped (over the backpressure limit) */
  send(data: string): number;
  /** Runs fn with the socket's sends gathered into one write (uWS: one syscall, not one per frame). */
  cork(fn: () => void): void;
  end(code: number, reason: string): void;
  getBufferedAmount(): number;
}

/**
 * admitting: upgraded, registering in presence; its frames are refused (not_ready).
 * present:   got `welcome`, counts as present, receives the lesson's broadcasts.
 * closed:    gone; nothing is sent any more.
 */
export type ConnectionState = 'admitting' | 'present' | 'closed';

export interface ConnectionLimits {
  messagesPerSecond: number;
  burst: number;
}

/** Consecutive invalid frames tolerated before the connection is closed with 4400. */
const MAX_CONSECUTIVE_INVALID = 20;

/** A settled join: every connection's `joined` once its own has settled (one object, not one per connection). */
export const SETTLED: Promise<void> = Promise.resolve();

/** One participant socket. Knows nothing of uWS or of other connections. */
export class ClientConnection {
  state: ConnectionState = 'admitting';
  /** settles when presence registration finished (successfully or not) */
  joined: Promise<void> = SETTLED;
  /** closed by a drain (1012): its departure reaches presence only after the drain's leave grace */
  drained = false;
  /**
   * The page shows image elements (it asked with `&images=1`). A page of a release before images
   * would fail on one: the board leaves them out of what it sends it (features/board/fanout.ts).
   */
  showsImages = true;
  /** the client's last sign of life (a frame or a pong), on the gateway's clock */
  lastSeenAt: number;
  private readonly bucket: TokenBucket;
  private refusedInARow = 0;
  private invalidInARow = 0;
  private lastRateErrorAt = -Infinity;

  constructor(
    readonly id: string,
    readonly socket: SocketLike,
    readonly link: ResolvedLink,
    readonly person: PublicPerson,
    readonly ip: string,
    private readonly limits: ConnectionLimits,
    readonly openedAt: number,
    /** performance.now() at the upgrade request (join latency: upgrade to welcome) */
    readonly upgradeAt: number = performance.now(),
  ) {
    this.bucket = new TokenBucket(limits.messagesPerSecond, limits.burst, openedAt);
    this.lastSeenAt = openedAt;
  }

  get lessonId(): string {
    return this.link.lesson_id;
  }

  /** the person's key in presence (the link's keyed hash of the partner's user id) */
  get userHash(): string {
    return this.link.user_hash;
  }

  send(frame: string): void {
    if (this.state !== 'closed') this.socket.send(frame);
  }

  /** Sends several frames (fn's `send`s, which check the state as ever) in one write to the socket (see SocketLike.cork). */
  sendAll(fn: () => void): void {
    this.socket.cork(fn);
  }

  sendError(code: ErrorCode, message: string, ref?: string): void {
    this.send(errorFrame(code, message, ref));
  }

  /** Closes with one of our codes. The transport reports the close back (Gateway.onClose). */
  close(name: CloseCodeName): void {
    if (this.state === 'closed') return;
    this.socket.end(CloseCode[name], CloseReason[name]);
  }

  /**
   * The per-message rate limit. Over the limit a frame is dropped with one
   * `rate_limited` error per second; a client that keeps sending a whole burst
   * more while over the limit is closed with 4429. Returns whether to process.
   */
  admitFrame(now: number): boolean {
    if (this.bucket.take(now)) {
      this.refusedInARow = 0;
      return true;
    }
    this.refusedInARow++;
    if (this.refusedInARow > this.limits.burst) {
      this.close('rateLimited');
      return false;
    }
    if (now - this.lastRateErrorAt >= 1000) {
      this.lastRateErrorAt = now;
      this.sendError('rate_limited', `at most ${this.limits.messagesPerSecond} messages per second`);
    }
    return false;
  }

  /** Counts a frame the protocol refused; too many in a row close the connection with 4400. */
  invalidFrame(code: ErrorCode, message: string, ref?: string): void {
    this.sendError(code, message, ref);
    if (++this.invalidInARow >= MAX_CONSECUTIVE_INVALID) this.close('badRequest');
  }

  validFrame(): void {
    this.invalidInARow = 0;
  }
}
