import uWS from 'uWebSockets.js';
import type { Deps } from '../src/deps.js';
import { checkReadiness } from '../src/lib/readiness.js';

/**
 * The realtime gateway (placeholder until the gateway issue lands): serves
 * /healthz and /readyz on GATEWAY_PORT.
 */
export async function startGateway(deps: Deps, port = deps.config.GATEWAY_PORT): Promise<{ port: number; close: () => Promise<void> }> {
  const app = uWS.App();
  app.get('/healthz', (res) => {
    res.cork(() => res.writeHeader('content-type', 'application/json').end('{"status":"ok"}'));
  });
  app.get('/readyz', (res) => {
    let aborted = false;
    res.onAborted(() => (aborted = true));
    void checkReadiness(deps).then((r) => {
      if (aborted) return;
      res.cork(() => res.writeStatus(r.ready ? '200 OK' : '503 Service Unavailable').writeHeader('content-type', 'application/json').end(JSON.stringify(r)));
    });
  });
  const socket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(deps.config.HOST, port, (s) => (s ? resolve(s) : reject(new Error(`gateway cannot listen on ${port}`))));
  });
  return {
    port: uWS.us_socket_local_port(socket),
    close: async () => uWS.us_listen_socket_close(socket),
  };
}
