import type { Deps } from '../src/deps.js';
import { orphanMs, rebuildMs, renewMs } from '../src/metering/rules.js';

/** Timing of the gateway derived from the settings (docs/metering.md, "Timing"). */
export function gatewayTiming(config: Deps['config']) {
  const leaseMs = config.GATEWAY_LEASE_SECONDS * 1000;
  const flushMs = Math.round(config.GATEWAY_METER_FLUSH_SECONDS * 1000);
  const idleMs = config.SESSION_IDLE_SECONDS * 1000;
  const heartbeatMs = renewMs(leaseMs);
  return {
    leaseMs,
    flushMs,
    idleMs,
    heartbeatMs,
    /** every node re-registers within one heartbeat of Redis losing its state */
    graceMs: 2 * heartbeatMs + 1000,
    startRetryMs: 10_000,
    sweepMs: Math.max(250, Math.min(5000, Math.round(idleMs / 4))),
    /** the orphan rule (src/metering/rules.ts) */
    orphanMs: orphanMs(flushMs, leaseMs),
    /** after Redis lost its state, nothing decides a lesson is empty for this long (rules.ts) */
    rebuildMs: rebuildMs(leaseMs),
  };
}
