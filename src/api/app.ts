import Koa from 'koa';
import Router from '@koa/router';
import compress from 'koa-compress';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import { RateLimiter } from '../lib/rateLimiter.js';
import { systemClock } from '../lib/clock.js';
import { randomBase62 } from '../lib/crypto.js';
import { batchedLessonLookup } from '../domain/lessons.js';
import { auth } from './middlewares/auth.js';
import type { AuthCache } from './authCache.js';
import { appErrorListener, errorHandler } from './middlewares/errorHandler.js';
import { idempotent } from './idempotency/idempotent.js';
import { readJsonBody } from './middlewares/jsonBody.js';
import { rateLimit } from './middlewares/rateLimit.js';
import { parsePart, parsePath } from './middlewares/validate.js';
import { API_PREFIX, buildOpenApi } from './openapi.js';
import { healthRoutes } from './routes/health.js';
import type { ApiMetrics } from '../metrics/api.js';
import { requestIdFrom } from './middlewares/requestId.js';
import { partnerRoutes } from './routes/index.js';
import type { ApiContext, ApiState, RouteDef } from './route.js';
import { READ_WAIT_MS, readOrUnavailable } from '../db/errors.js';

export const SERVICE_VERSION = '0.1.0';
/** JSON bodies from this size on are sent compressed when the client accepts it. */
export const COMPRESS_THRESHOLD_BYTES = 1024;

/**
 * The Koa app of the partner API. Routes never look at the Host header, so the
 * legacy base address (same path) is served by the same app.
 */
export function createApiApp(deps: Deps, authCache: AuthCache, routes: RouteDef[] = partnerRoutes, opts: { metrics?: ApiMetrics } = {}): Koa<ApiState> {
  // The client address (ctx.ip) is the X-Forwarded-For entry TRUST_PROXY_HOPS from the right, the
  // one our own outermost proxy wrote; entries further left are the client's to forge.
  const hops = deps.config.TRUST_PROXY_HOPS;
  const app = new Koa<ApiState>({ proxy: hops > 0, maxIpsCount: hops });
  const log = deps.log.child({ component: 'api' });
  app.on('error', appErrorListener(log));
  let lastRedisWarning = 0;
  const limiterOpts = {
    // Redis TIME is the limiters' clock in production (API hosts' clocks may differ); a test's injected clock replaces it
    now: deps.clock === systemClock ? undefined : () => deps.clock.now().getTime(),
    onRedisError: (err: unknown) => {
      if (Date.now() - lastRedisWarning > 10_000) {
        lastRedisWarning = Date.now();
        log.warn({ err: String(err) }, 'rate limiter: Redis unreachable, enforcing the limit per process');
      }
    },
  };
  const limiter = new RateLimiter(deps.redis, deps.config.RATE_LIMIT_PER_MINUTE, 60_000, limiterOpts);
  const unauthenticated = new RateLimiter(deps.redis, deps.config.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE, 60_000, limiterOpts);
  const openapi = buildOpenApi(routes, SERVICE_VERSION);
  const lessons = batchedLessonLookup(deps.readSql, { max: 100, concurrency: deps.config.DATABASE_READ_POOL_SIZE });

  const { metrics } = opts;
  // Filled once the routers are built (below): the route patterns, and how to find the one a request
  // answered before its handler ran (401, 429) was meant for (`_matchedRoute` is then the prefix's `use`).
  const patterns = new Set<string>();
  let patternOf: (path: string, method: string) => string | undefined = () => undefined;
  const routeOf = (ctx: Koa.ParameterizedContext<ApiState>): string | null => {
    const matched = ctx._matchedRoute;
    if (typeof matched === 'string' && patterns.has(matched)) return matched;
    return patternOf(ctx.path, ctx.method) ?? null;
  };
  app.use(async (ctx, next) => {
    ctx.state.deps = deps;
    ctx.state.lessons = lessons;
    // A request id our own proxy wrote is kept (only behind one: TRUST_PROXY_HOPS > 0), else ours.
    ctx.state.requestId = (hops > 0 && requestIdFrom(ctx.get('x-request-id'))) || randomBase62(16);
    ctx.set('X-Request-Id', ctx.state.requestId);
    const started = performance.now();
    metrics?.inFlight.inc();
    try {
      await next();
    } finally {
      const ms = performance.now() - started;
      const route = routeOf(ctx);
      // Access log: never headers, bodies or query strings (they may carry secrets).
      log.info(
        { request_id: ctx.state.requestId, method: ctx.method, route, status: ctx.status, ms: Math.round(ms), partner_id: ctx.state.auth?.partner.id },
        'request',
      );
      if (metrics) {
        metrics.inFlight.dec();
        // The router's pattern, never the raw path (ids in it would make a series each).
        metrics.request(route ?? undefined, ctx.method, ctx.status, ms / 1000);
        // A 429 before authentication is the per-address limit; after it, the key's.
        if (ctx.status === 429) metrics.rateLimited(ctx.state.auth ? 'api_key' : 'unauthenticated');
      }
    }
  });
  // gzip or br (as the client's Accept-Encoding prefers; br at quality 4, koa-compress's default) for
  // compressible bodies (JSON; not the PNG preview) of at least COMPRESS_THRESHOLD_BYTES or of unknown
  // length (the streamed usage report). Below that the header bytes saved do not pay for the CPU.
  app.use(compress({ threshold: COMPRESS_THRESHOLD_BYTES }));
  app.use(errorHandler);

  // Paths are case-sensitive (RFC 3986), as the spec writes them. @koa/router matches routes
  // without regard to case by default but its `use` prefix with it, so `/API/partner/v1/...` ran a
  // route without the key check and the rate limits (the handler then failed with 500).
  const publicRouter = new Router<ApiState>({ sensitive: true });
  healthRoutes(publicRouter, deps);
  publicRouter.get(`${API_PREFIX}/openapi.json`, (ctx) => {
    ctx.body = openapi;
  });
  app.use(publicRouter.routes());

  const router = new Router<ApiState>({ prefix: API_PREFIX, sensitive: true });
  router.use(auth(authCache, unauthenticated), rateLimit(limiter));
  for (const r of routes) {
    const koaPath = r.path.replace(/\{(\w+)\}/g, ':$1');
    router[r.method](koaPath, async (ctx: ApiContext) => {
      const params = r.params ? parsePath(r.params, ctx.params) : undefined;
      const query = r.query ? parsePart(r.query, ctx.query, 'query') : undefined;
      const raw = r.body ? await readJsonBody(ctx) : undefined;
      const run = async () => {
        const body = r.body ? parsePart(r.body, raw, 'body') : undefined;
        await r.handler(ctx, { params, query, body });
      };
      // A GET only reads: when its Postgres connection was lost under it, it runs once more
      // and answers 503 if it never got through; a POST's retry is the partner's,
      // with its Idempotency-Key.
      const retried = (err: Error) => log.warn({ err: err.message }, 'a read lost its Postgres connection; running it again');
      await (r.method === 'post' ? idempotent(ctx, raw, run) : r.method === 'get' ? readOrUnavailable(run, retried, r.ownDeadline ? undefined : READ_WAIT_MS) : run());
    });
  }
  app.use(router.routes());
  for (const r of [publicRouter, router]) for (const layer of r.stack) if (layer.methods.length > 0) patterns.add(String(layer.path));
  patternOf = (path, method) => {
    const layer = router.match(path, method).pathAndMethod.filter((l) => l.methods.length > 0).at(-1);
    return layer ? String(layer.path) : undefined;
  };
  // Nothing matched: 405 with Allow when the path exists under other methods,
  // else a JSON 404 (never an HTML page).
  const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
  app.use(async (ctx) => {
    if (ctx.status !== 404 || ctx.body !== undefined) return;
    const allowed = methods.filter((m) => router.match(ctx.path, m).route);
    if (allowed.length) throw Errors.methodNotAllowed(allowed);
    throw Errors.notFound('Route');
  });
  return app;
}
