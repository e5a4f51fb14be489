import type { Deps } from '../src/deps.js';
import { orphanMs, rebuildMs, renewMs } from '../src/metering/rules.js';

/** Timing of the gateway derived from the settings (docs/metering.md, "Timing"). */
export function gatewayTiming(config: Deps['config']) {
  const leaseMs = config.GATEWAY_LEASE_SECONDS * 1000;
  const flushMs = Math.round(config.GATEWAY_METER_FLUSH_SECONDS * 1000);
  const idleMs = config.SESSION_IDLE_SECONDS * 1000;
  const heartbeatMs = renewMs(leaseMs);
  // uWS counts idle time in 4-second ticks and rounds other values up (9 s
  // closes at ~12 s): a multiple of 4 keeps the close within the setting.
  const idleTimeoutS = Math.max(8, Math.floor(config.GATEWAY_IDLE_TIMEOUT_SECONDS / 4) * 4);
  return {
    idleTimeoutS,
    /**
     * A silent socket is pinged once a cycle: (idle - one uWS tick) / 3 leaves a live socket two
     * answered pings of slack before uWS closes it, and at most 5 s, so a departure noticed late
     * (dated at the last sign of life + one cycle: never before the socket could have died) is
     * over-billed by at most 5 s with the defaults.
     */
    keepaliveCycleMs: Math.min(5000, ((idleTimeoutS - 4) * 1000) / 3),
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
