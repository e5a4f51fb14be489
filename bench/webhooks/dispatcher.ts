/**
 * One webhook dispatcher process for bench/webhooks/run.ts: the dispatcher role
 * of src/main.ts, plus trust in the bench receiver's throw-away CA (the test-only
 * `ca` runtime option). Prints `ready <number>` once it runs; stops on SIGTERM.
 */
import { readFileSync } from 'node:fs';
import { loadConfig } from '../../src/config.js';
import { createDeps } from '../../src/deps.js';
import { startDispatcher } from '../../src/webhooks/index.js';
import { buildWebhookRuntime } from '../../src/webhooks/runtime.js';

const config = loadConfig();
const base = createDeps(config);
// the bench's receivers have a self-signed certificate: this dispatcher trusts its CA
const deps = { ...base, webhookRuntime: buildWebhookRuntime(config, { ca: readFileSync(process.env.BENCH_CA_FILE!, 'utf8') }) };
const d = await startDispatcher(deps);
process.stdout.write(`ready ${d.id}\n`);
async function stop(): Promise<void> {
  await d.close();
  await deps.close();
  process.exit(0);
}
process.on('SIGTERM', () => void stop());
// The bench holds our stdin: when it exits, for whatever reason, so do we.
process.stdin.on('end', () => void stop());
process.stdin.resume();
