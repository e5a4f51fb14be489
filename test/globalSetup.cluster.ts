import type { TestProject } from 'vitest/node';
import { startRedisCluster } from './helpers/redisCluster.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** REDIS_CLUSTER_NODES of the `redis-cluster` project ('' in the default one) */
    redisClusterNodes: string;
  }
}

/**
 * The `redis-cluster` test project only (vitest.config.ts): one local 3-master
 * Redis Cluster for the whole run, stopped at the end. Its tests find it in
 * testEnv's REDIS_CLUSTER_NODES.
 */
export default async function setup(project: TestProject) {
  const cluster = await startRedisCluster(3);
  project.provide('redisClusterNodes', cluster.nodes);
  return () => cluster.stop();
}
