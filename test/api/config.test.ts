import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('configuration', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/lessons',
      REDIS_URL: 'redis://127.0.0.1:6379/0',
      REDIS_KEY_PREFIX: 'wb:',
      ROLES: ['api', 'gateway', 'dispatcher'],
      API_PORT: 8080,
      GATEWAY_PORT: 8081,
      EMBED_BASE_URL: 'http://localhost:8081',
      RATE_LIMIT_PER_MINUTE: 600,
      LOG_LEVEL: 'info',
      SESSION_IDLE_SECONDS: 300,
    });
  });

  it('names every bad variable', () => {
    expect(() => loadConfig({ API_PORT: 'eighty', ROLES: 'api,cron', DATABASE_URL: 'nope' })).toThrow(ConfigError);
    try {
      loadConfig({ API_PORT: 'eighty', ROLES: 'api,cron', DATABASE_URL: 'nope' });
    } catch (err) {
      const msg = (err as Error).message;
      expect(msg).toMatch(/API_PORT/);
      expect(msg).toMatch(/ROLES/);
      expect(msg).toMatch(/DATABASE_URL/);
    }
  });

  it('stops the process with a message naming the variable', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: { ...process.env, RATE_LIMIT_PER_MINUTE: '-1' }, encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/RATE_LIMIT_PER_MINUTE/);
  });
});
