import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { DOC as CONFIG_DOC, describeConfig, undescribed } from '../../src/configDoc.js';

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

  it('gives every setting a meaning in src/config.ts', () => {
    expect(undescribed()).toEqual([]);
  });

  it('is documented in docs/configuration.md as src/config.ts describes it (npx tsx src/configDoc.ts --write)', () => {
    expect(readFileSync(CONFIG_DOC, 'utf8')).toBe(describeConfig());
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

  it('takes REDIS_CLUSTER_NODES as a comma list of host:port, and nothing else', () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-2:7001' }).REDIS_CLUSTER_NODES).toBe('10.0.0.1:7000, redis-2:7001');
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: 'redis-1,redis-2' })).toThrow(/REDIS_CLUSTER_NODES/);
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: 'redis://10.0.0.1:7000' })).toThrow(/REDIS_CLUSTER_NODES/);
  });

  it('stops the process with a message naming the variable', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: { ...process.env, RATE_LIMIT_PER_MINUTE: '-1' }, encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/RATE_LIMIT_PER_MINUTE/);
  });
});
