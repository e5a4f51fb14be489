import type { Server } from 'node:http';
import type { Deps } from './deps.js';
import { createApiApp } from './api/app.js';
import { AuthCache } from './api/authCache.js';

/** Starts the partner API on API_PORT; resolves once it listens. */
export async function startApi(deps: Deps, port = deps.config.API_PORT): Promise<{ server: Server; port: number; close: () => Promise<void> }> {
  const authCache = new AuthCache(deps);
  await authCache.start();
  const app = createApiApp(deps, authCache);
  const server = app.listen(port, deps.config.HOST);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  server.keepAliveTimeout = 65_000;
  const address = server.address();
  const actual = typeof address === 'object' && address ? address.port : port;
  return {
    server,
    port: actual,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await authCache.stop();
    },
  };
}
