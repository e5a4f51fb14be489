import { loadConfig } from '../../src/config.js';
import { createDeps } from '../../src/deps.js';
import { createLogger } from '../../src/logger.js';
import { startGateway } from '../../realtime/index.js';
import { applyGatewayMemoryMode } from '../../realtime/memory.js';
import './probeSignal.js';

/**
 * The gateway process of the load test: src/main.ts with ROLES=gateway, except
 * that LOADTEST_FEATURES=none starts it without the lesson features (board,
 * call, chat), to measure the gateway core of issue 3 on its own.
 */
const config = loadConfig();
const log = createLogger(config.LOG_LEVEL);
const deps = createDeps(config, { log });
const gw = await startGateway(deps, config.GATEWAY_PORT, process.env.LOADTEST_FEATURES === 'none' ? { features: [] } : {});
const memory = applyGatewayMemoryMode(config, gw.gateway, log.child({ component: 'gateway' }));
log.info({ component: 'gateway', port: gw.port, ...memory }, 'gateway listening');
process.on('SIGTERM', () => {
  void gw.close().then(async () => {
    await deps.close();
    process.exit(0);
  });
});
// LOADTEST_LOOP_DELAY=1: log the event-loop delay and CPU every second (with LOADTEST_SERVER_LOG=<file>)
if (process.env.LOADTEST_LOOP_DELAY) {
  const { monitorEventLoopDelay } = await import('node:perf_hooks');
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  setInterval(() => {
    log.info({ p50: +(h.percentile(50) / 1e6).toFixed(1), p99: +(h.percentile(99) / 1e6).toFixed(1), max: +(h.max / 1e6).toFixed(1), cpu: process.cpuUsage() }, 'loop delay');
    h.reset();
  }, 1000).unref();
}
// LOADTEST_MEMORY_LOG=1: log where the RSS is (V8 heap committed and used, external, array buffers) every 5 s
if (process.env.LOADTEST_MEMORY_LOG) {
  const mb = (n: number) => +(n / 2 ** 20).toFixed(1);
  setInterval(() => {
    const m = process.memoryUsage();
    log.info({ rss: mb(m.rss), heapTotal: mb(m.heapTotal), heapUsed: mb(m.heapUsed), external: mb(m.external), arrayBuffers: mb(m.arrayBuffers) }, 'memory');
  }, 5000).unref();
}
