/**
 * For reproducing CPU starvation in one server process of the load test
 * (sockets lost with 1006 under a noisy machine). Loaded before the
 * entry point with LOADTEST_GATEWAY_NODE_ARGS="--import ./bench/gateway/starve.mjs"
 * and LOADTEST_STARVE=<busy ms>/<period ms>: every period, the event loop is
 * held busy for that long, as when the process gets a fraction of a core.
 * Plain JavaScript so that it loads before tsx.
 */
const [busy, period] = (process.env.LOADTEST_STARVE ?? '').split('/').map(Number);
if (busy > 0 && period > busy) {
  setInterval(() => {
    const until = performance.now() + busy;
    while (performance.now() < until);
  }, period).unref();
}
