import type { RedisOptions } from 'ioredis';
import { afterAll } from 'vitest';
import type { Clock } from '../../../src/lib/clock.js';
import { isCluster } from '../../../src/redis.js';
import { startGateway, type GatewayOptions, type RunningGateway } from '../../../realtime/index.js';
import { makeDeps } from '../../helpers/deps.js';
import { isolatedEnv } from '../../helpers/isolation.js';

export type TestGateway = RunningGateway & {
  /** the environment of this node (DATABASE_URL, REDIS_KEY_PREFIX): pass it to another node or an API */
  env: Record<string, string>;
  deps: ReturnType<typeof makeDeps>;
  wsUrl: (token: string) => string;
  httpUrl: (path: string) => string;
  /** runs every maintenance job once, in order, and waits for the Postgres work they queued */
  maintain: () => Promise<void>;
  /** waits until nothing is in flight (Gateway.idle: joins, departures, feature hooks, bus publishes, meter effects) */
  settle: () => Promise<void>;
};

/**
 * A real uWS gateway on a free loopback port with real Postgres and Redis;
 * closed after the file. Without `env.DATABASE_URL` it gets a database and a
 * Redis prefix of its own (test/helpers/isolation.ts); nodes of one test share them
 * by passing the same env. `redis` overrides options of the node's Redis connections (every one
 * of them is a duplicate of deps.redis, which takes them before the gateway starts).
 */
export async function startTestGateway(
  opts: { env?: Record<string, string>; clock?: Clock; options?: GatewayOptions; redis?: Pick<RedisOptions, 'retryStrategy'> } = {},
): Promise<TestGateway> {
  const env = opts.env?.DATABASE_URL ? opts.env : { ...(await isolatedEnv()), ...opts.env };
  const deps = makeDeps({ env, clock: opts.clock });
  if (opts.redis) {
    if (isCluster(deps.redis)) throw new Error('startTestGateway: redis options apply to a single Redis only');
    // ioredis reads its options at each reconnection, and duplicate() copies them
    Object.assign(deps.redis.options, opts.redis);
  }
  // tests drive maintenance themselves (maintain())
  const gw = await startGateway(deps, 0, { ...opts.options, timers: false });
  afterAll(async () => {
    await gw.close();
    await deps.close();
  });
  const settle = () => gw.gateway.idle();
  return {
    ...gw,
    env,
    deps,
    // as the page: it shows images
    wsUrl: (token) => `ws://127.0.0.1:${gw.port}/ws?token=${encodeURIComponent(token)}&images=1`,
    httpUrl: (path) => `http://127.0.0.1:${gw.port}${path}`,
    settle,
    maintain: async () => {
      const m = gw.maintenance;
      await m.guard('heartbeat', () => m.heartbeat());
      await settle();
      await m.guard('flush', () => m.flush());
      await settle();
      await m.guard('sweep', () => m.sweep());
      await settle();
    },
  };
}
