import { afterAll } from 'vitest';
import { randomBase62 } from '../../src/lib/crypto.js';
import { InMemoryPresence } from '../../realtime/presence/InMemoryPresence.js';
import { RedisPresence } from '../../realtime/presence/RedisPresence.js';
import { makeDeps } from '../helpers/deps.js';
import { masters } from '../../src/redis.js';
import { presenceSuite } from './presenceSuite.js';

/**
 * One Presence suite (./presenceSuite.ts), two implementations: the Lua in a
 * real Redis, and the in-process one. Both follow MeterMachine.ts; the suite
 * is what proves they agree.
 */
const deps = makeDeps();
afterAll(() => deps.close());

presenceSuite('Redis', (opts) => {
  const namespace = `gwtest-${randomBase62(6)}:`;
  return {
    presence: new RedisPresence(deps.redis, { ...opts, namespace }),
    // what a Redis restart does to us: every key of the namespace gone
    lose: async () => {
      // every master of a cluster (KEYS sees one node's keys); DEL through the prefixed client
      const prefix = deps.config.REDIS_KEY_PREFIX;
      for (const m of masters(deps.redis)) {
        await Promise.all((await m.keys(`${prefix}${namespace}*`)).map((k) => deps.redis.del(k.slice(prefix.length))));
      }
    },
  };
});

// the in-process one touches no Redis: the redis-cluster project (vitest.config.ts) would run the
// same assertions a second time for nothing
if (process.env.TEST_REDIS !== 'cluster') {
  presenceSuite('in memory', (opts) => {
    const presence = new InMemoryPresence(opts);
    return { presence, lose: async () => presence.clear() };
  });
}
