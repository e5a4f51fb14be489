import { afterAll } from 'vitest';
import { InMemoryLedger } from '../../realtime/metering/InMemoryLedger.js';
import { postgresLedger } from '../../realtime/metering/MeterLedger.js';
import { makeDeps } from '../helpers/deps.js';
import { lessonWithLinks, sessionsOf } from './helpers/fixtures.js';
import { ledgerSuite } from './ledgerSuite.js';

/**
 * One MeterLedger suite (./ledgerSuite.ts), two implementations: Postgres
 * (src/metering/), and the in-process one the gateway core's unit tests use.
 */
const deps = makeDeps();
afterAll(() => deps.close());

ledgerSuite('Postgres', () => ({
  ledger: postgresLedger(deps.sql),
  lesson: async () => (await lessonWithLinks(deps.sql)).lesson.id,
  archive: async (lessonId, at) => void (await deps.sql`UPDATE lessons SET archived_at = ${at} WHERE id = ${lessonId}`),
  sessions: (lessonId) => sessionsOf(deps.sql, lessonId),
}));

ledgerSuite('in memory', () => {
  const ledger = new InMemoryLedger();
  let n = 0;
  return {
    ledger,
    lesson: async () => `lesson-${++n}`,
    archive: async (lessonId, at) => ledger.archive(lessonId, at),
    sessions: async (lessonId) => ledger.sessionsOf(lessonId),
  };
});
