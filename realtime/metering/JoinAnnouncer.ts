import type { Sql } from '../../src/db/index.js';
import type { Logger } from '../../src/logger.js';
import { recordParticipantsJoined, type ParticipantJoin } from '../../src/metering/participants.js';
import { Limiter, withRetry } from '../lib/Limiter.js';

/** Arrivals are collected this long (or up to BATCH_MAX) before one transaction records them. */
const BATCH_MS = 20;
const BATCH_MAX = 200;

/**
 * participant.joined for arrivals Redis did not filter out: batched, so a
 * burst of 1,000 joins a second costs a few transactions instead of a
 * thousand; Postgres still decides the 6-hour rule (recordParticipantsJoined).
 * A failed batch is retried; an arrival is never announced before its
 * batch commits.
 */
export class JoinAnnouncer {
  private pending: ParticipantJoin[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly limiter = new Limiter(2);

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
  ) {}

  add(join: ParticipantJoin): void {
    this.pending.push(join);
    if (this.pending.length >= BATCH_MAX) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), BATCH_MS);
  }

  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending.splice(0);
    if (batch.length === 0) return;
    void this.limiter
      .run(() => withRetry(() => recordParticipantsJoined(this.sql, batch), [200, 1000, 5000]))
      .catch((err) => this.log.error({ err, arrivals: batch.length }, 'participant.joined batch failed'));
  }

  async idle(): Promise<void> {
    this.flush();
    await this.limiter.idle();
  }
}
