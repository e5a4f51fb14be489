import { afterAll } from 'vitest';
import { BusHub, InMemoryBus } from '../../realtime/bus/InMemoryBus.js';
import { LessonBus } from '../../realtime/bus/LessonBus.js';
import { makeDeps } from '../helpers/deps.js';
import { busSuite } from './busSuite.js';

/**
 * One Bus suite (./busSuite.ts), two implementations: LessonBus over Redis
 * pub/sub, and the in-process one the gateway core's unit tests use.
 */
const deps = makeDeps();
afterAll(() => deps.close());

busSuite('Redis', () => {
  const buses: LessonBus[] = [];
  return {
    node: (id) => {
      const bus = new LessonBus(deps.redis, deps.config.REDIS_KEY_PREFIX, id, deps.log);
      buses.push(bus);
      return bus;
    },
    close: async () => void (await Promise.all(buses.map((b) => b.close()))),
  };
});

// the in-process one touches no Redis: the redis-cluster project would run it a second time for nothing
if (process.env.TEST_REDIS !== 'cluster') busSuite('in memory', () => {
  const hub = new BusHub();
  const buses: InMemoryBus[] = [];
  return {
    node: (id) => {
      const bus = new InMemoryBus(hub, id);
      buses.push(bus);
      return bus;
    },
    close: async () => void (await Promise.all(buses.map((b) => b.close()))),
  };
});
