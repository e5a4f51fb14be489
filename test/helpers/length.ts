/**
 * How long the suite's longest tests run. `npm test` runs a short version of
 * each (one round where the full test takes three, two window sizes of four, a
 * 15 s network outage where the full one is a minute), so the whole suite stays
 * under 15 minutes on a 2-core machine; `npm run test:full` (TEST_FULL=1) runs
 * them at full length (README, "Commands"). Each use says what the full length
 * adds.
 */
const FULL = process.env.TEST_FULL === '1';

/** `suite` in `npm test`, `full` in `npm run test:full`. */
export const suiteOrFull = <T>(suite: T, full: T): T => (FULL ? full : suite);
