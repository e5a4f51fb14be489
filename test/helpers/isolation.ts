import { afterAll, inject } from 'vitest';
import postgres from 'postgres';
import { migrate } from '../../src/db/migrate.js';
import { randomBase62 } from '../../src/lib/crypto.js';

/**
 * A database and a Redis key prefix of their own for a test file that cannot
 * share the run's.
 *
 * Every gateway node sweeps the whole database (idle ends, orphans, archived
 * lessons): that is right in production, where one deployment owns its
 * database, but in the shared test database it would end sessions that other
 * test files leave running on purpose. So gateway tests get their own
 * database (dropped after the file) and their own key prefix (removed by the
 * global teardown, which deletes everything under the run's prefix).
 *
 * Files that count what one process did are the other case: test files run
 * two at a time, and every key another file creates in the shared database
 * notifies `auth_changed`, which (rightly) makes an API process forget what it
 * remembered and look up again (test/api/unauthenticated.test.ts).
 */
export async function isolatedEnv(): Promise<Record<string, string>> {
  const base = new URL(inject('databaseUrl'));
  const name = `${base.pathname.slice(1)}_gw_${randomBase62(6).toLowerCase()}`;
  const url = new URL(base);
  url.pathname = `/${name}`;
  await migrate(url.toString());
  afterAll(async () => {
    const admin = new URL(base);
    admin.pathname = '/postgres';
    const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
    await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => undefined);
    await sql.end();
  });
  return { DATABASE_URL: url.toString(), REDIS_KEY_PREFIX: `${inject('redisPrefix')}gw-${randomBase62(6)}:` };
}
