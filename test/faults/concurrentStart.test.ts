import { readdir } from 'node:fs/promises';
import postgres from 'postgres';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { MIGRATION_FILE, migrate, migrationsDir } from '../../src/db/migrate.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { freePort } from '../helpers/net.js';
import { spawnService } from '../helpers/process.js';

/**
 * Several processes starting together on a database that
 * does not exist yet. Names start with the run's database name, so
 * test/globalSetup.ts drops them even if this file's afterAll never runs.
 */
const created: string[] = [];
function newDatabaseUrl(): string {
  const url = new URL(inject('databaseUrl'));
  const name = `${url.pathname.slice(1)}_cs${randomBase62(6).toLowerCase()}`;
  created.push(name);
  url.pathname = `/${name}`;
  return url.toString();
}
afterAll(async () => {
  const admin = new URL(inject('databaseUrl'));
  admin.pathname = '/postgres';
  const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
  for (const name of created) await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await sql.end();
});

async function appliedOnce(url: string): Promise<void> {
  const files = (await readdir(migrationsDir())).filter((f) => MIGRATION_FILE.test(f)).sort();
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const rows = await sql<{ name: string }[]>`SELECT name FROM schema_migrations ORDER BY name`;
  await sql.end();
  expect(rows.map((r) => r.name)).toEqual(files);
}

describe('concurrent start on a new database', () => {
  it('eight migrate() calls at once: all succeed, the database is created once and each migration applied once', async () => {
    const url = newDatabaseUrl();
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => migrate(url)));
    expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    const applied = results.map((r) => (r as PromiseFulfilledResult<string[]>).value);
    const files = (await readdir(migrationsDir())).filter((f) => MIGRATION_FILE.test(f));
    expect(applied.flat().sort()).toEqual(files.sort()); // each file by exactly one caller
    await appliedOnce(url);
  });

  it('four service processes started at once on a new database: none exits, all become ready', async () => {
    const url = newDatabaseUrl();
    const ports = await Promise.all([0, 1, 2, 3].map(() => freePort()));
    const procs = await Promise.all(
      ports.map((port) => spawnService({ DATABASE_URL: url, ROLES: 'api', API_PORT: String(port) }, `http://127.0.0.1:${port}/readyz`, 50_000)),
    );
    for (const p of procs) expect(p.child.exitCode, p.output()).toBeNull();
    await appliedOnce(url);
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  }, 60_000);
});
