/**
 * The partner API alone in a process of its own, built like `src/main.ts`
 * builds the `api` role (same config, pool, Redis, app), for bench/reports.
 * Not src/main.ts itself: that also loads the gateway's code, which this
 * benchmark does not need. Prints {"port"} once it listens; SIGTERM stops it.
 */
import { loadConfig } from '../../src/config.js';
import { createDeps } from '../../src/deps.js';
import { startApi } from '../../src/server.js';

const config = loadConfig();
const deps = createDeps(config);
const api = await startApi(deps);
process.stdout.write(`${JSON.stringify({ port: api.port })}\n`);
process.once('SIGTERM', async () => {
  await api.close();
  await deps.close();
  process.exit(0);
});
