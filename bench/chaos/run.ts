import { parseArgs } from 'node:util';
import { loadavg } from 'node:os';
import { SCENARIOS, type Result } from './scenarios.js';

/**
 * `npm run chaos`: every fault scenario of issue 13 against real processes
 * (docs/reliability.md). `-- --short` runs the short versions of the quick
 * ones only (what the test suite runs); `-- --only pg-kills,redis-40` picks.
 * Prints one block per scenario and a JSON line per result (for the docs).
 */
const { values } = parseArgs({ options: { short: { type: 'boolean', default: false }, only: { type: 'string' } } });
const names = values.only ? values.only.split(',') : Object.keys(SCENARIOS).filter((n) => !values.short || SCENARIOS[n].short);
process.stderr.write(`[chaos] load average at start: ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);

export function describe(r: Result): string {
  const exits = r.exits.filter((e) => e.expected !== 'stop');
  return [
    `== ${r.scenario} (${r.params})`,
    `   billing: truth ${r.truth} s (${r.truthFromRequests} s from the upgrade requests), billed ${r.billed} s over ${r.lessons} lessons; per lesson billed - truth from ${r.maxUnder} to ${r.maxOver} s${r.lessons ? ` (outside the truth window: ${r.perLesson.join(', ')})` : ''}`,
    `   events: ${r.events.expected} recorded, ${r.events.delivered} delivered, ${r.events.missing} missing, ${r.events.duplicates} duplicates (most sends of one event: ${r.events.maxPerEvent})`,
    `   exits: ${exits.length === 0 ? 'none' : exits.map((e) => `${e.role} ${e.signal ?? e.code}${e.expected ? ` (${e.expected})` : ' UNEXPECTED'}`).join(', ')}`,
    ...r.notes.map((n) => `   note: ${n}`),
    ...exits.filter((e) => !e.expected).map((e) => `   ${e.role} last lines:\n${e.tail}`),
  ].join('\n');
}

let failed = false;
for (const name of names) {
  const s = SCENARIOS[name];
  if (!s) throw new Error(`unknown scenario ${name}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  const t = Date.now();
  try {
    const r = await s.run(values.short);
    process.stdout.write(`${describe(r)}\n   (${((Date.now() - t) / 1000).toFixed(0)} s)\n${JSON.stringify(r)}\n`);
    if (r.exits.some((e) => e.expected === null)) failed = true;
  } catch (err) {
    failed = true;
    process.stdout.write(`== ${name}: FAILED ${(err as Error).stack}\n`);
  }
}
process.exit(failed ? 1 : 0);
