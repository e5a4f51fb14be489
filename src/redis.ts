/// <reference path="./types/cluster-key-slot.d.ts" />
import { Cluster, Redis as SingleRedis, type ClusterOptions, type RedisOptions } from 'ioredis';
import calculateSlot from 'cluster-key-slot';

/**
 * The service's Redis: one Redis at REDIS_URL, or a Redis Cluster when
 * REDIS_CLUSTER_NODES lists its nodes (ioredis `Cluster`). Both take the same
 * commands; what differs is said where it matters (sharded pub/sub in
 * realtime/bus/LessonBus.ts, the presence scripts grouped by slot in
 * realtime/presence/RedisPresence.ts). Every key that one script touches with
 * others carries the same hash tag (`l:{<lesson>}:c`, `rlw:{<key>}`), so it
 * works the same on both.
 */
export type Redis = SingleRedis | Cluster;

const COMMON = { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false } as const;

/** `host:port,host:port` (REDIS_CLUSTER_NODES) as ioredis' startup nodes; empty: no cluster. */
export function parseClusterNodes(list: string): { host: string; port: number }[] {
  return list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const i = s.lastIndexOf(':');
      const port = Number(s.slice(i + 1));
      if (i <= 0 || !Number.isInteger(port) || port <= 0) throw new Error(`REDIS_CLUSTER_NODES: "${s}" is not host:port`);
      return { host: s.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port };
    });
}

/**
 * Every Redis key of the service starts with REDIS_KEY_PREFIX (ioredis keyPrefix,
 * which a Cluster applies too), so several installations and test runs share one
 * Redis without colliding. Lua scripts receive prefixed KEYS as usual. The prefix
 * holds no `{`: a hash tag must be the key's first braces.
 */
export function createRedis(url: string, keyPrefix: string, clusterNodes = ''): Redis {
  if (keyPrefix.includes('{')) throw new Error('REDIS_KEY_PREFIX must not contain "{" (Redis Cluster hash tags)');
  const nodes = parseClusterNodes(clusterNodes);
  if (nodes.length === 0) return new SingleRedis(url, { keyPrefix, ...COMMON });
  return new Cluster(nodes, clusterOptions(keyPrefix));
}

function clusterOptions(keyPrefix: string, extra: Partial<ClusterOptions> = {}): ClusterOptions {
  const { maxRetriesPerRequest, lazyConnect } = COMMON;
  return {
    keyPrefix,
    enableOfflineQueue: true,
    lazyConnect,
    // every read at the master: presence decides from what the scripts just wrote
    scaleReads: 'master',
    redisOptions: { maxRetriesPerRequest },
    ...extra,
  };
}

export function isCluster(redis: Redis): redis is Cluster {
  return redis instanceof Cluster;
}

/**
 * A new connection (or, on a cluster, a new set of connections) to the same
 * Redis with the same prefix: `Redis.duplicate` and `Cluster.duplicate` take
 * their overrides differently. `shardedSubscribers` (a cluster only) gives the
 * copy one subscriber connection per master for SSUBSCRIBE.
 */
export function duplicateRedis(redis: Redis, opts: { enableAutoPipelining?: boolean; shardedSubscribers?: boolean } = {}): Redis {
  if (isCluster(redis)) {
    const { shardedSubscribers, ...rest } = opts;
    return redis.duplicate(undefined, { ...rest, ...(shardedSubscribers ? { shardedSubscribers: true } : {}) });
  }
  const { shardedSubscribers: _ignored, ...rest } = opts;
  return redis.duplicate(rest as RedisOptions);
}

/** The masters of a cluster (each its own connection), or the one Redis. */
export function masters(redis: Redis): SingleRedis[] {
  return isCluster(redis) ? redis.nodes('master') : [redis];
}

/** The cluster hash slot of a key (CRC16 of its hash tag, or of the whole key), as Redis and ioredis compute it. */
export function keySlot(key: string): number {
  return calculateSlot(key);
}

let tagBySlot: string[] | undefined;

/**
 * A short hash tag (`{…}`) of each of the 16,384 slots: a key ending in
 * `slotTag(s)` hashes to slot s. Lets a key that belongs to no lesson (the
 * epoch of a slot's state, a node's connections in that slot) live in the
 * slot of the lessons it goes with. Computed once (about 170,000 CRC16s).
 */
export function slotTag(slot: number): string {
  if (!tagBySlot) {
    const tags: string[] = new Array(16384);
    let found = 0;
    for (let i = 0; found < 16384; i++) {
      const t = i.toString(36);
      const s = calculateSlot(t);
      if (tags[s] === undefined) {
        tags[s] = `{${t}}`;
        found++;
      }
    }
    tagBySlot = tags;
  }
  return tagBySlot[slot];
}

export { SingleRedis, Cluster };
