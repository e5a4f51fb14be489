import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { sealingKeys } from '../../src/webhooks/keys.js';
import { SecretBox } from '../../src/webhooks/secrets.js';
import { testEnv } from '../helpers/deps.js';

/** A logger whose lines the test reads. */
function recordingLog() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('info', { write: (s: string) => void lines.push(JSON.parse(s)) } as never);
  return { log, lines };
}

describe('secrets are sealed by default', () => {
  it('refuses to start an API with NODE_ENV=production and no WEBHOOK_SECRET_KEYS, naming the variable', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: { ...process.env, ...testEnv(), ROLES: 'api', NODE_ENV: 'production', WEBHOOK_SECRET_KEYS: '' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/WEBHOOK_SECRET_KEYS is not set/);
  }, 70_000);

  it('generates a key once on a laptop, keeps it in SECRET_KEYS_FILE (mode 0600) and says where, and reuses it', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'keys-'));
    const file = path.join(dir, 'sub', 'secret-keys');
    const first = recordingLog();
    const keys = sealingKeys({ WEBHOOK_SECRET_KEYS: [], NODE_ENV: 'development', SECRET_KEYS_FILE: file }, first.log);
    expect(keys).toHaveLength(1);
    expect(Buffer.from(keys[0], 'base64')).toHaveLength(32);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(first.lines.some((l) => l.file === file && String(l.msg).includes('generated'))).toBe(true);
    // the key itself never reaches the log
    expect(JSON.stringify(first.lines)).not.toContain(keys[0]);
    const again = sealingKeys({ WEBHOOK_SECRET_KEYS: [], NODE_ENV: 'development', SECRET_KEYS_FILE: file }, recordingLog().log);
    expect(again).toEqual(keys);
    expect(readFileSync(file, 'utf8').trim()).toBe(keys[0]);
    // what one process sealed, the next one opens
    expect(new SecretBox(again).open(new SecretBox(keys).seal('whsec_x', 'p'), 'p')).toBe('whsec_x');
  });

  it('takes the given keys as they are, and refuses a file that holds no valid key', () => {
    const given = [Buffer.alloc(32, 3).toString('base64')];
    expect(sealingKeys({ WEBHOOK_SECRET_KEYS: given, NODE_ENV: 'production', SECRET_KEYS_FILE: '/nonexistent/x' }, recordingLog().log)).toBe(given);
    expect(() => sealingKeys({ WEBHOOK_SECRET_KEYS: [], NODE_ENV: 'production', SECRET_KEYS_FILE: '/nonexistent/x' }, recordingLog().log)).toThrow(ConfigError);
    const dir = mkdtempSync(path.join(tmpdir(), 'keys-'));
    const bad = path.join(dir, 'k');
    writeFileSync(bad, 'short\n');
    expect(() => sealingKeys({ WEBHOOK_SECRET_KEYS: [], NODE_ENV: 'development', SECRET_KEYS_FILE: bad }, recordingLog().log)).toThrow(/32 bytes/);
  });
});
