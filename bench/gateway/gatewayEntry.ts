import './probeSignal.js';

/**
 * Where the gateway's code comes from: the build (dist/, what `npm start` and the Docker image run) unless
 * LOADTEST_FROM_SOURCE=1. This entry runs under tsx, whose esbuild transform keeps every function's name
 * with a call that gives each closure created from an object literal a dictionary of its own (about 260 B and
 * a slow defineProperty each time): the production build has none of that. The load test checks that the
 * build is not older than the sources before it starts (fleet.ts, staleBuild).
 */
const root = process.env.LOADTEST_FROM_SOURCE === '1' ? '../../' : '../../dist/';
const { loadConfig } = (await import(`${root}src/config.js`)) as typeof import('../../src/config.js');
const { createDeps } = (await import(`${root}src/deps.js`)) as typeof import('../../src/deps.js');
const { createLogger } = (await import(`${root}src/logger.js`)) as typeof import('../../src/logger.js');
const { startGateway } = (await import(`${root}realtime/index.js`)) as typeof import('../../realtime/index.js');
const { applyGatewayMemoryMode } = (await import(`${root}realtime/memory.js`)) as typeof import('../../realtime/memory.js');

/**
 * The gateway process of the load test: src/main.ts with ROLES=gateway, except
 * that LOADTEST_FEATURES=none starts it without the lesson features (board,
 * call, chat), to measure the gateway core on its own.
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
