import { performance } from 'node:perf_hooks';
import { duplicateRedis, type Redis } from '../src/redis.js';
import uWS from 'uWebSockets.js';
import type { Deps } from '../src/deps.js';
import { Batcher } from '../src/lib/Batcher.js';
import { readMeterSeeds, type MeterSeed } from '../src/metering/meters.js';
import { Gateway } from './Gateway.js';
import { gatewayParts, type GatewayOptions } from './parts.js';
import { defaultFeatures } from './features/index.js';
import type { Maintenance } from './Maintenance.js';
import { RedisPresence } from './presence/RedisPresence.js';
import { createServer, listen } from './server.js';
import { gatewayTiming } from './timing.js';

export type { GatewayOptions } from './parts.js';
export type { GatewayFeature, GatewayApi, FeatureContext, HttpRoute, HttpReply } from './features/api.js';
export { defineMessage } from './features/api.js';
export { CloseCode } from './protocol/closeCodes.js';

export interface RunningGateway {
  port: number;
  gateway: Gateway;
  maintenance: Maintenance;
  /** the node's own Redis connection (bus, per-person rates, presence), apart from deps.redis */
  redis: Redis;
  /**
   * Graceful stop: the drain (refuse upgrades, /readyz 503, sockets asked to reconnect with 1012
   * over DRAIN_SECONDS, their departures recorded after the drain's grace), then close the listener,
   * close what is left (1001), drop the lease.
   */
  close: () => Promise<void>;
}

/**
 * The realtime gateway on GATEWAY_PORT: GET /embed/<token>, the WebSocket at
 * /ws?token=<token>, /healthz and /readyz (docs/protocol.md). Builds what the
 * core is given (its Redis connection, RedisPresence, the meter-seed reader),
 * the core, and the uWS transport around it.
 */
export async function startGateway(deps: Deps, port = deps.config.GATEWAY_PORT, options: GatewayOptions & { timers?: boolean } = {}): Promise<RunningGateway> {
  const timing = gatewayTiming(deps.config);
  // Our own connection with auto-pipelining: the commands of many joins in
  // one event-loop turn go out in one write.
  const redis = duplicateRedis(deps.redis, { enableAutoPipelining: true });
  redis.on('error', (err) => deps.log.warn({ err: err.message, component: 'gateway' }, 'redis error'));
  // the first arrival in a lesson Redis does not know reads its meter from Postgres; a burst shares one statement
  const metrics = options.metrics;
  const readSeeds = async (ids: string[]) => {
    const t0 = performance.now();
    const out = await readMeterSeeds(deps.readSql, ids);
    metrics?.call('postgres', 'meter.seed', performance.now() - t0);
    return out;
  };
  const seeds = new Batcher<string, MeterSeed | undefined>(readSeeds, {
    delayMs: 1,
    max: 100,
    concurrency: deps.config.DATABASE_READ_POOL_SIZE,
  });
  const loadSeed = (lessonId: string) => seeds.add(lessonId);
  const presence = new RedisPresence(redis, {
    idleMs: timing.idleMs,
    leaseMs: timing.leaseMs,
    flushMs: timing.flushMs,
    graceMs: timing.graceMs,
    startRetryMs: timing.startRetryMs,
    loadSeed,
  });
  // the features' Redis commands at a join (chat history, media states) go out with the core's, one write per turn
  const features = options.features ?? defaultFeatures({ ...deps, redis });
  const gateway = new Gateway(deps, gatewayParts(deps, { ...options, features, presence, redis, loadSeed }));
  const server = createServer(gateway);
  await gateway.start({ timers: options.timers });
  const socket = await listen(server.app, deps.config.HOST, port);
  let closing: Promise<void> | undefined;
  return {
    port: uWS.us_socket_local_port(socket),
    gateway,
    maintenance: gateway.maintenance,
    redis,
    close: () =>
      (closing ??= (async () => {
        server.stopAccepting();
        await gateway.drain(deps.config.DRAIN_SECONDS * 1000);
        uWS.us_listen_socket_close(socket);
        await gateway.close();
        redis.disconnect();
        server.stop();
      })()),
  };
}
