import uWS from 'uWebSockets.js';
import type { Deps } from '../src/deps.js';
import { listenForArchives } from './ArchiveListener.js';
import { Gateway, type GatewayOptions } from './Gateway.js';
import { defaultFeatures } from './features/index.js';
import { Maintenance } from './Maintenance.js';
import { createServer, listen } from './server.js';

export type { GatewayOptions } from './Gateway.js';
export type { GatewayFeature, GatewayApi, FeatureContext, HttpRoute, HttpReply } from './features.js';
export { defineMessage } from './protocol/registry.js';
export { CloseCode } from './protocol/closeCodes.js';

export interface RunningGateway {
  port: number;
  gateway: Gateway;
  maintenance: Maintenance;
  /** Graceful stop: refuse upgrades, close sockets (1001), record their departures, drop the lease. */
  close: () => Promise<void>;
}

/**
 * The realtime gateway on GATEWAY_PORT: GET /embed/<token>, the WebSocket at
 * /ws?token=<token>, /healthz and /readyz (docs/protocol.md).
 */
export async function startGateway(deps: Deps, port = deps.config.GATEWAY_PORT, options: GatewayOptions = {}): Promise<RunningGateway> {
  const gateway = new Gateway(deps, { ...options, features: options.features ?? defaultFeatures(deps) });
  const server = createServer(gateway);
  const maintenance = new Maintenance(gateway);
  // Take the lease before serving, so other nodes never see our people without one.
  await maintenance.guard('heartbeat', () => maintenance.heartbeat());
  const unlisten = await listenForArchives(gateway);
  await gateway.admission.start();
  await gateway.warmUp();
  maintenance.start();
  const socket = await listen(server.app, deps.config.HOST, port);
  let closing: Promise<void> | undefined;
  return {
    port: uWS.us_socket_local_port(socket),
    gateway,
    maintenance,
    close: () =>
      (closing ??= (async () => {
        maintenance.stop();
        server.stopAccepting();
        uWS.us_listen_socket_close(socket);
        for (const room of [...gateway.rooms.values()]) for (const conn of [...room.conns]) conn.close('goingAway');
        await gateway.idle();
        for (const f of gateway.featureList()) await f.close?.().catch((err) => gateway.log.error({ err, feature: f.name }, 'feature close failed'));
        await gateway.presence.leaveNode(gateway.nodeId).catch(() => undefined);
        await unlisten().catch(() => undefined);
        await gateway.admission.stop().catch(() => undefined);
        await gateway.bus.close();
        gateway.redis.disconnect();
        server.stop();
      })()),
  };
}
