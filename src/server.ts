import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Deps } from './deps.js';
import { createApiApp } from './api/app.js';
import { AuthCache } from './api/authCache.js';
import type { ApiMetrics } from './metrics/api.js';

export interface RunningApi {
  server: Server;
  port: number;
  /**
   * Graceful stop: stops accepting at once, lets the requests in flight finish (each answered
   * with `Connection: close`), for at most SHUTDOWN_TIMEOUT_SECONDS, then closes what is left.
   */
  close: () => Promise<void>;
}

/** Starts the partner API on API_PORT; resolves once it listens. */
export async function startApi(deps: Deps, port = deps.config.API_PORT, opts: { metrics?: ApiMetrics } = {}): Promise<RunningApi> {
  const authCache = new AuthCache(deps);
  await authCache.start();
  const app = createApiApp(deps, authCache, undefined, opts);
  const log = deps.log.child({ component: 'api' });
  // Requests being served, so a stop can wait for them and mark their responses as the last on their connection.
  const active = new Set<ServerResponse>();
  let draining = false;
  let idle: (() => void) | undefined;
  const handle = app.callback();
  const server = createServer();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    active.add(res);
    res.once('close', () => {
      active.delete(res);
      if (draining && active.size === 0) idle?.();
    });
    if (draining) res.setHeader('connection', 'close');
    void handle(req, res);
  });
  server.listen(port, deps.config.HOST);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  server.keepAliveTimeout = 65_000;
  const address = server.address();
  const actual = typeof address === 'object' && address ? address.port : port;
  let closing: Promise<void> | undefined;
  return {
    server,
    port: actual,
    close: () =>
      (closing ??= (async () => {
        draining = true;
        // No new connections; idle keep-alive ones are closed now, busy ones after their response.
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const res of active) if (!res.headersSent) res.setHeader('connection', 'close');
        server.closeIdleConnections();
        if (active.size > 0) {
          const timeoutMs = deps.config.SHUTDOWN_TIMEOUT_SECONDS * 1000;
          log.info({ inFlight: active.size, timeoutMs }, 'stopping: finishing requests in flight');
          let timer: NodeJS.Timeout | undefined;
          const finished = await Promise.race([
            new Promise<boolean>((resolve) => (idle = () => resolve(true))),
            new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
          ]);
          clearTimeout(timer);
          if (!finished) log.warn({ inFlight: active.size }, 'stopping: requests still in flight at the deadline are cut');
        }
        server.closeAllConnections();
        await closed;
        await authCache.stop();
      })()),
  };
}
