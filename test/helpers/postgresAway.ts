import postgres from 'postgres';
import { afterAll } from 'vitest';

/**
 * Postgres away from one test database, as a failover or an outage would be
 * for the processes using it: the database refuses new connections
 * (ALLOW_CONNECTIONS false, which binds superusers too) and its backends are
 * terminated, from a connection to another database. `back()` lets
 * connections in again. Closed with the file.
 */
export function postgresSwitch(databaseUrl: string): { away: () => Promise<void>; back: () => Promise<void> } {
  const database = new URL(databaseUrl).pathname.slice(1);
  const adminUrl = new URL(databaseUrl);
  adminUrl.pathname = '/postgres';
  const admin = postgres(adminUrl.toString(), { max: 1, onnotice: () => undefined });
  afterAll(() => admin.end());
  return {
    away: async () => {
      await admin.unsafe(`ALTER DATABASE "${database}" WITH ALLOW_CONNECTIONS false`);
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${database}`;
    },
    back: async () => {
      await admin.unsafe(`ALTER DATABASE "${database}" WITH ALLOW_CONNECTIONS true`);
    },
  };
}
