import { Redis } from 'ioredis';

/**
 * Every Redis key of the service starts with REDIS_KEY_PREFIX (ioredis keyPrefix),
 * so several installations and test runs share one Redis without colliding.
 * Lua scripts receive prefixed KEYS as usual.
 */
export function createRedis(url: string, keyPrefix: string): Redis {
  return new Redis(url, {
    keyPrefix,
    maxRetriesPerRequest: 2,
    enableOfflineQueue: true,
    lazyConnect: false,
  });
}

export type { Redis };
