import type { Deps } from '../deps.js';
import { RedisPresence } from '../../realtime/presence/RedisPresence.js';
import { gatewayTiming } from '../../realtime/timing.js';
import { withTimeout } from '../lib/timeout.js';

/** A list does not wait longer for Redis (the rate limiter gives it as long). */
const REDIS_WAIT_MS = 250;

const readers = new WeakMap<object, RedisPresence>();

/**
 * How many people are in each lesson now, as the gateways' shared presence in
 * Redis has it (one read-only script per lesson, pipelined). The partner API
 * reads it through the gateways' own RedisPresence, so the keys are never
 * spelled twice. A lesson Redis does not know has nobody; Redis unreachable
 * (no answer within REDIS_WAIT_MS) answers null for every lesson rather than failing the list.
 */
export async function peopleNow(deps: Pick<Deps, 'redis' | 'config' | 'log'>, lessonIds: string[]): Promise<(number | null)[]> {
  let presence = readers.get(deps.redis);
  if (!presence) {
    const t = gatewayTiming(deps.config);
    presence = new RedisPresence(deps.redis, { ...t, loadSeed: async () => undefined });
    readers.set(deps.redis, presence);
  }
  const p = presence;
  try {
    return await withTimeout(Promise.all(lessonIds.map(async (id) => (await p.people(id)).count)), REDIS_WAIT_MS);
  } catch (err) {
    deps.log.warn({ err: (err as Error).message }, 'people_now not read: Redis did not answer');
    return lessonIds.map(() => null);
  }
}
