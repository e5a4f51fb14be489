import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError, ConfigSchema, loadConfig } from '../../src/config.js';

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

  it('lists every setting in the README with its default', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const rows = new Map([...readme.matchAll(/^\| `([A-Z0-9_]+)` \| ([^|]*) \|/gm)].map((m) => [m[1], m[2].trim()]));
    const defaults = loadConfig({}) as Record<string, unknown>;
    // defaults that are not a plain value, and how the README shows them
    const described: Record<string, string> = {
      GATEWAY_ALLOWED_ORIGINS: '(empty: any)',
      WEBHOOK_ALLOW_HOSTS: '(empty)',
      WEBHOOK_SECRET_KEYS: '(empty)',
      WEB_DIR: '`dist/web` of the checkout',
      ICE_SERVERS: '`[]`',
      TURN_URLS: '(empty)',
      TURN_SECRET: '(empty)',
      METRICS_PORT: '(empty: off)',
      REDIS_CLUSTER_NODES: '(empty)',
      GATEWAY_HEAP_GROWING_PERCENT: '(empty: V8\'s own)',
      GATEWAY_SIZE_MODE_BURST_JOINS: '(empty: 100)',
    };
    for (const key of Object.keys(ConfigSchema.shape)) {
      const v = defaults[key];
      const shown = described[key] ?? `\`${Array.isArray(v) ? v.join(',') : String(v)}\``;
      expect(rows.get(key), key).toBe(shown);
    }
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
