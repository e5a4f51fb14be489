import type Router from '@koa/router';
import type { Deps } from '../../deps.js';
import type { ApiState } from '../route.js';
import { checkReadiness } from '../../lib/readiness.js';

/** /healthz: the process is up. /readyz: Postgres and Redis answer. */
export function healthRoutes(router: Router<ApiState>, deps: Deps): void {
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    const r = await checkReadiness(deps);
    ctx.status = r.ready ? 200 : 503;
    ctx.body = r;
  });
}
