import type { Sql } from '../../src/db/index.js';
import type { Logger } from '../../src/logger.js';
import { recordParticipantsJoined, type ParticipantJoin } from '../../src/metering/participants.js';
import { Batcher } from '../../src/lib/Batcher.js';
import { withRetry } from '../../src/lib/retry.js';

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
  private readonly batcher: Batcher<ParticipantJoin>;

  constructor(sql: Sql, log: Logger) {
    this.batcher = new Batcher<ParticipantJoin, void>(
      async (batch) => {
        await withRetry(() => recordParticipantsJoined(sql, batch), [200, 1000, 5000]).catch((err) =>
          log.error({ err, arrivals: batch.length }, 'participant.joined batch failed'),
        );
        return batch.map((): void => undefined);
      },
      { delayMs: BATCH_MS, max: BATCH_MAX, concurrency: 2 },
    );
  }

  add(join: ParticipantJoin): void {
    void this.batcher.add(join);
  }

  idle(): Promise<void> {
    return this.batcher.idle();
  }
}
