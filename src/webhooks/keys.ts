import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, type Config } from '../config.js';
import type { Logger } from '../logger.js';

/**
 * The keys that seal webhook secrets and stored idempotent replies (src/webhooks/secrets.ts) for a
 * process that stores them (the API, the dispatcher): nothing is ever stored in plain text.
 *
 * - WEBHOOK_SECRET_KEYS given: those.
 * - Not given, NODE_ENV=production (a fleet: the Docker image sets it): a ConfigError naming the
 *   variable; every process of a fleet must seal and open with the same keys, which only the
 *   operator can hand them.
 * - Not given otherwise (a laptop's `npm start`): the key kept in SECRET_KEYS_FILE, generated there
 *   once (mode 0600; `.local/` is gitignored), and the log says where. Processes started from the
 *   same directory share it.
 */
export function sealingKeys(config: Pick<Config, 'WEBHOOK_SECRET_KEYS' | 'NODE_ENV' | 'SECRET_KEYS_FILE'>, log: Logger): string[] {
  if (config.WEBHOOK_SECRET_KEYS.length > 0) return config.WEBHOOK_SECRET_KEYS;
  if (config.NODE_ENV === 'production') {
    throw new ConfigError(
      'WEBHOOK_SECRET_KEYS is not set: with NODE_ENV=production every process that stores webhook secrets or idempotent replies must be given the keys that seal them (generate one with `openssl rand -base64 32`; README, "Configuration": WEBHOOK_SECRET_KEYS)',
    );
  }
  const file = path.resolve(config.SECRET_KEYS_FILE);
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new ConfigError(`SECRET_KEYS_FILE ${file} cannot be read: ${(err as Error).message}`);
  }
  if (text === undefined) {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    try {
      // written aside, then linked into place: of two processes starting at once, one links and the
      // other reads the whole key it linked (never a file still being written)
      const aside = `${file}.${process.pid}.tmp`;
      writeFileSync(aside, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
      try {
        linkSync(aside, file);
      } finally {
        unlinkSync(aside);
      }
      log.warn({ file }, 'WEBHOOK_SECRET_KEYS is not set: generated a sealing key for this machine in SECRET_KEYS_FILE (keep it: what it sealed cannot be read without it; set WEBHOOK_SECRET_KEYS anywhere else)');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new ConfigError(`SECRET_KEYS_FILE ${file} cannot be written: ${(err as Error).message}`);
    }
    text = readFileSync(file, 'utf8');
  } else {
    log.info({ file }, 'WEBHOOK_SECRET_KEYS is not set: sealing with the key kept in SECRET_KEYS_FILE');
  }
  const keys = text.split(/[\s,]+/).filter(Boolean);
  if (!keys.length || keys.some((k) => Buffer.from(k, 'base64').length !== 32)) {
    throw new ConfigError(`SECRET_KEYS_FILE ${file}: each key must be 32 bytes, base64`);
  }
  return keys;
}
