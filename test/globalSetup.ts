import postgres from 'postgres';
import { Redis } from 'ioredis';
import type { TestProject } from 'vitest/node';
import { migrate } from '../src/db/migrate.js';
import { randomBase62 } from '../src/lib/crypto.js';

/**
 * One database and one Redis key prefix per test run, created here and removed
 * at the end, so runs never collide or leave state. Test files share them and
 * isolate themselves by creating their own partners.
 */
declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    redisUrl: string;
    redisPrefix: string;
  }
}

export default async function setup(project: TestProject) {
  const base = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/lessons';
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
  const run = `${Date.now().toString(36)}${randomBase62(6).toLowerCase()}`;
  const url = new URL(base);
  url.pathname = `/lessons_test_${run}`;
  const databaseUrl = url.toString();
  const redisPrefix = `test:${run}:`;
  await migrate(databaseUrl);
  project.provide('databaseUrl', databaseUrl);
  project.provide('redisUrl', redisUrl);
  project.provide('redisPrefix', redisPrefix);

  return async () => {
    const admin = new URL(base);
    admin.pathname = '/postgres';
    const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
    // the run's database and every database a test file made from its name
    // (test/helpers/isolation.ts), even if that file's own afterAll never ran
    const dbs = await sql<{ datname: string }[]>`
      SELECT datname FROM pg_database WHERE datname = ${`lessons_test_${run}`} OR datname LIKE ${`lessons_test_${run}\_%`}`;
    for (const { datname } of dbs) await sql.unsafe(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    await sql.end();
    const redis = new Redis(redisUrl);
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisPrefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
    redis.disconnect();
  };
}
