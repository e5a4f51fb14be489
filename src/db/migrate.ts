import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import postgres from 'postgres';
import type { Logger } from '../logger.js';


/** The migrations folder, whether running from src/ (tsx) or dist/src/ (compiled). */
export function migrationsDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const root = here.includes(`${path.sep}dist${path.sep}`) ? path.resolve(here, '../../..') : path.resolve(here, '../..');
  return path.join(root, 'migrations');
}

/** Creates the database named in `url` when it does not exist yet. */
export async function ensureDatabase(url: string): Promise<void> {
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
        if ((err as { code?: string }).code !== '42P04') throw err;
      }
    }
  } finally {
    await sql.end();
  }
}

/**
 * Applies every migrations/NNN_name.sql not applied yet, in order, each in its
 * own transaction, under an advisory lock so several processes starting at once
 * apply each migration exactly once.
 */
export async function migrate(url: string, log?: Logger): Promise<string[]> {
  await ensureDatabase(url);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const applied: string[] = [];
  try {
    await sql`SELECT pg_advisory_lock(7243001)`;
    await sql`CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`;
    const done = new Set((await sql<{ name: string }[]>`SELECT name FROM schema_migrations`).map((r) => r.name));
    const dir = migrationsDir();
    const files = (await readdir(dir)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
    for (const file of files) {
      if (done.has(file)) continue;
      const text = await readFile(path.join(dir, file), 'utf8');
      await sql.begin(async (tx) => {
        await tx.unsafe(text);
        await tx`INSERT INTO schema_migrations (name) VALUES (${file})`;
      });
      applied.push(file);
      log?.info({ migration: file }, 'migration applied');
    }
    await sql`SELECT pg_advisory_unlock(7243001)`;
  } finally {
    await sql.end();
  }
  return applied;
}
