import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import postgres from 'postgres';
import type { Logger } from '../logger.js';
import { MIGRATION_LOCK } from './locks.js';
import { retryWhileConnectionLost, START_RETRY_MS } from './errors.js';


/** The migrations folder, whether running from src/ (tsx) or dist/src/ (compiled). */
export function migrationsDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const root = here.includes(`${path.sep}dist${path.sep}`) ? path.resolve(here, '../../..') : path.resolve(here, '../..');
  return path.join(root, 'migrations');
}

/**
 * Postgres's answers to a CREATE DATABASE that lost a race with another one:
 * duplicate_database when the other committed first, unique_violation (on
 * pg_database's name index) when both inserted at once.
 */
const DATABASE_EXISTS = new Set(['42P04', '23505']);


/** Creates the database named in `url` when it does not exist yet; several processes may call it at once. */
async function ensureDatabase(url: string): Promise<void> {
  const u = new URL(url);
  const name = decodeURIComponent(u.pathname.replace(/^\//, ''));
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`SELECT 1 AS x FROM pg_database WHERE datname = ${name}`;
    if (!row) {
      try {
        await sql.unsafe(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
      } catch (err) {
        // another process created it between our check and our CREATE
        if (!DATABASE_EXISTS.has((err as { code?: string }).code ?? '')) throw err;
      }
    }
  } finally {
    await sql.end();
  }
}

/** A migration's file name: `NNN_name.sql`, or `NNNb_name.sql` for a second one of the same number. */
export const MIGRATION_FILE = /^\d+[a-z]?_.+\.sql$/;

/**
 * Applies every migrations/NNN_name.sql not applied yet, in order, each in its
 * own transaction, so several processes starting at once apply each migration
 * exactly once. The lock is a transaction advisory lock taken in each of those
 * transactions, with the "applied yet?" check after it: it cannot outlive a
 * lost connection the way a session lock silently would (the session lock's
 * connection reset, the next statements ran on a new connection without it).
 * A connection lost during start is retried (for `retryMs`); any other error
 * ends the start.
 */
export async function migrate(url: string, log?: Logger, retryMs = START_RETRY_MS): Promise<string[]> {
  return retryWhileConnectionLost(
    async () => {
      await ensureDatabase(url);
      return applyMigrations(url, log);
    },
    { what: 'migrations', log, retryMs },
  );
}

async function applyMigrations(url: string, log?: Logger): Promise<string[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const applied: string[] = [];
  try {
    const dir = migrationsDir();
    // `014b_x.sql` runs after `014_y.sql` ("_" sorts before letters): a second migration of one number
    const files = (await readdir(dir)).filter((f) => MIGRATION_FILE.test(f)).sort();
    for (const file of files) {
      const text = await readFile(path.join(dir, file), 'utf8');
      const ran = await sql.begin(async (tx) => {
        await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
        await tx`CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`;
        const [done] = await tx`SELECT 1 FROM schema_migrations WHERE name = ${file}`;
        if (done) return false;
        await tx.unsafe(text);
        await tx`INSERT INTO schema_migrations (name) VALUES (${file})`;
        return true;
      });
      if (!ran) continue;
      applied.push(file);
      log?.info({ migration: file }, 'migration applied');
    }
  } finally {
    await sql.end();
  }
  return applied;
}
