import { commandLine } from '../lib/cli.js';
import { loadavg } from 'node:os';
import { SCENARIOS, type Result } from './scenarios.js';

/**
 * `npm run chaos`: every fault scenario against real processes
 * (docs/reliability.md). Prints one block per scenario and a JSON line per
 * result (for the docs).
 */
const { values } = commandLine(`npm run chaos: the fault scenarios against real processes (docs/reliability.md)\nScenarios: ${Object.keys(SCENARIOS).join(', ')}`, {
  short: { type: 'boolean', default: false, help: 'the short versions of the quick scenarios only (what the test suite runs)' },
  only: { type: 'string', help: 'a comma list of scenarios to run' },
});
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
