import { z } from 'zod';
import { FLUSH_SECONDS_MAX, SESSION_IDLE_SECONDS_DEFAULT } from './metering/rules.js';

/**
 * Every setting of the service, parsed once at start-up. A bad value stops the
 * process with a message that names the variable (see `loadConfig`).
 * Every variable here is in the README's configuration table with its default.
 */
const port = z.coerce.number().int().min(0).max(65535);
const seconds = z.coerce.number().int().positive();
const csv = z
  .string()
  .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean));

export const ROLE_NAMES = ['api', 'gateway', 'dispatcher'] as const;
export type Role = (typeof ROLE_NAMES)[number];

/** An on/off setting: true, false, 1 or 0. */
const flag = (byDefault: 'true' | 'false') => z.enum(['true', 'false', '1', '0']).default(byDefault).transform((v) => v === 'true' || v === '1');

export const ConfigSchema = z.object({
  DATABASE_URL: z.string().url().default('postgres://postgres@127.0.0.1:5432/lessons'),
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10),
  DATABASE_READ_POOL_SIZE: z.coerce.number().int().min(1).max(50).default(3),
  REDIS_URL: z.string().url().default('redis://127.0.0.1:6379/0'),
  REDIS_KEY_PREFIX: z.string().default('wb:'),
  // host:port,host:port of a Redis Cluster (REDIS_URL is then unused); empty: the one Redis at REDIS_URL
  REDIS_CLUSTER_NODES: z.string().regex(/^(?:[^,\s:/[\]]+|\[[0-9a-fA-F:]+\]):\d+(?:\s*,\s*(?:[^,\s:/[\]]+|\[[0-9a-fA-F:]+\]):\d+)*$/, 'a comma list of host:port').default(''),
  ROLES: csv.pipe(z.array(z.enum(ROLE_NAMES)).min(1)).default(['api', 'gateway', 'dispatcher']),
  HOST: z.string().default('0.0.0.0'),
  API_PORT: port.default(8080),
  GATEWAY_PORT: port.default(8081),
  EMBED_BASE_URL: z.string().url().default('http://localhost:8081').transform((s) => s.replace(/\/+$/, '')),
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().positive().default(600),
  /** requests per minute per client address that carry no valid API key (docs/api-decisions.md) */
  RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: z.coerce.number().int().positive().default(60),
  /** reverse proxies in front of the API that append to X-Forwarded-For; 0: the TCP peer is the client */
  TRUST_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(0),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Realtime gateway
  /** the idle end (src/metering/rules.ts) */
  SESSION_IDLE_SECONDS: seconds.default(SESSION_IDLE_SECONDS_DEFAULT),
  GATEWAY_IDLE_TIMEOUT_SECONDS: z.coerce.number().int().min(8).max(30).default(20),
  GATEWAY_MAX_PAYLOAD_BYTES: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(65_536),
  GATEWAY_MAX_BACKPRESSURE_BYTES: z.coerce.number().int().min(16_384).default(1_048_576),
  GATEWAY_MESSAGES_PER_SECOND: z.coerce.number().positive().default(50),
  GATEWAY_MESSAGE_BURST: z.coerce.number().int().positive().default(100),
  GATEWAY_MAX_CONNECTIONS_PER_IP: z.coerce.number().int().positive().default(256),
  /** sockets (open or upgrading) this node holds; past it upgrades get 503 and /readyz 503. 0: the soft descriptor limit less the Postgres pools and 64 (realtime/admission/ConnectionCap.ts) */
  GATEWAY_MAX_CONNECTIONS: z.coerce.number().int().min(0).default(0),
  /** a process running the gateway tells V8 to favour memory over speed (--optimize-for-size): what a held connection keeps in RSS (realtime/memory.ts) */
  GATEWAY_OPTIMIZE_FOR_SIZE: flag('true'),
  /** with GATEWAY_OPTIMIZE_FOR_SIZE=false only: V8 grows the old generation by at most this percent (--heap-growing-percent), a middle ground between the two (realtime/memory.ts) */
  GATEWAY_HEAP_GROWING_PERCENT: z.coerce.number().int().min(10).max(100).optional(),
  /** with size mode on only: size mode is suspended while joins arrive at this many per second or more (its collections would pause them), resumed 2 s after; 0: never suspended; empty: 100 (realtime/memory.ts) */
  GATEWAY_SIZE_MODE_BURST_JOINS: z.coerce.number().int().min(0).optional(),
  /** open sockets of one person in one lesson on a node; a newer one closes the oldest (4409) */
  GATEWAY_MAX_SOCKETS_PER_PERSON: z.coerce.number().int().min(1).max(64).default(4),
  /** cursor positions a person may have relayed per second across their sockets on a node, and the burst */
  GATEWAY_PERSON_CURSORS_PER_SECOND: z.coerce.number().positive().default(30),
  GATEWAY_PERSON_CURSOR_BURST: z.coerce.number().int().positive().default(60),
  GATEWAY_ALLOWED_ORIGINS: csv.default([]),
  GATEWAY_TRUST_PROXY: flag('false'),
  GATEWAY_LEASE_SECONDS: z.coerce.number().int().min(3).max(15).default(10),
  GATEWAY_METER_FLUSH_SECONDS: z.coerce.number().min(0.2).max(FLUSH_SECONDS_MAX).default(5),
  GATEWAY_TOKEN_CACHE_SECONDS: z.coerce.number().int().min(0).max(60).default(10),
  // Webhooks
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
  WEBHOOK_RETRY_SCHEDULE: csv
    .transform((xs) => xs.map(Number))
    .pipe(z.array(z.number().int().min(0)).min(1))
    .default([30, 120, 600, 1800, 3600, 10800, 21600, 43200]),
  WEBHOOK_ALLOW_HOSTS: csv.default([]),
  // base64 AES-256 keys (32 bytes each) sealing webhook secrets at rest; the first seals, all open
  WEBHOOK_SECRET_KEYS: csv
    .pipe(z.array(z.string().refine((k) => Buffer.from(k, 'base64').length === 32, 'each key must be 32 bytes, base64')))
    .default([]),
  WEBHOOK_POLL_MS: z.coerce.number().int().min(10).default(1000),
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(256),
  WEBHOOK_PARTNER_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(8),
  // Board (docs/board.md)
  BOARD_COMMIT_MAX_LESSONS: z.coerce.number().int().min(1).max(1000).default(100),
  BOARD_COMMIT_CONCURRENCY: z.coerce.number().int().min(1).max(16).default(2),
  BOARD_PREVIEW_DEBOUNCE_MS: z.coerce.number().int().min(0).max(60_000).default(2000),
  BOARD_PREVIEW_MIN_INTERVAL_MS: z.coerce.number().int().min(0).max(3_600_000).default(60_000),
  BOARD_PREVIEW_WIDTH: z.coerce.number().int().min(64).max(2048).default(800),
  // Bounded preview rendering (docs/board.md, "Bounded rendering"): the maxima keep queue + timeout within 10 s
  BOARD_RENDER_CONCURRENCY: z.coerce.number().int().min(1).max(16).default(1),
  BOARD_RENDER_TIMEOUT_MS: z.coerce.number().int().min(100).max(6000).default(5000),
  BOARD_RENDER_MEMORY_MB: z.coerce.number().int().min(64).max(4096).default(512),
  BOARD_RENDER_QUEUE_MS: z.coerce.number().int().min(0).max(4000).default(4000),
  BOARD_RELAY_GAP_MS: z.coerce.number().int().min(10).max(60_000).default(1500),
  // Files on the board (docs/board.md, "Images and PDFs")
  /** largest file one upload may carry, in bytes (the request body; the stored re-encode counts against the lesson) */
  FILE_MAX_BYTES: z.coerce.number().int().min(1024).max(100 * 1024 * 1024).default(10 * 1024 * 1024),
  /** stored bytes of all files of one lesson */
  FILE_LESSON_MAX_BYTES: z.coerce.number().int().min(1024).max(10 * 1024 * 1024 * 1024).default(100 * 1024 * 1024),
  /** files of one lesson */
  FILE_LESSON_MAX_FILES: z.coerce.number().int().min(1).max(100_000).default(500),
  /** uploads per person (across their tabs and the gateway's nodes) in any rolling minute */
  FILE_UPLOADS_PER_MINUTE: z.coerce.number().int().min(1).max(10_000).default(60),
  /** decoded pixels (width x height, read from the header before decoding) above which an image is refused */
  FILE_MAX_PIXELS: z.coerce.number().int().min(1).max(268_402_689).default(40_000_000),
  /** images a gateway process decodes and re-encodes at once (each may take ~4 bytes a pixel); the rest wait */
  FILE_PROCESS_CONCURRENCY: z.coerce.number().int().min(1).max(16).default(1),
  /** folder of the built participant page served by the gateway (default: dist/web of this checkout) */
  WEB_DIR: z.string().min(1).optional(),
  // Video call
  ICE_SERVERS: z
    .string()
    .transform((s, ctx) => {
      try {
        return JSON.parse(s) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be JSON' });
        return z.NEVER;
      }
    })
    .pipe(z.array(z.object({ urls: z.union([z.string(), z.array(z.string())]), username: z.string().optional(), credential: z.string().optional() })))
    .default([]),
  // TURN REST credentials (coturn use-auth-secret): per participant, docs/board.md "Video call"
  TURN_URLS: csv.pipe(z.array(z.string().regex(/^turns?:/, 'each URL must start with turn: or turns:'))).default([]),
  TURN_SECRET: z.string().min(16, 'at least 16 characters').optional(),
  TURN_TTL_SECONDS: z.coerce.number().int().min(60).max(7 * 86400).default(43_200),
  // Operations (docs/operations.md)
  /** port of this process's Prometheus /metrics (and /healthz, /readyz) listener on HOST; unset: no listener */
  METRICS_PORT: port.optional(),
  /** on SIGTERM the API finishes requests in flight for at most this long, then closes what is left */
  SHUTDOWN_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(300).default(15),
  /** the gateway's drain on SIGTERM: participants are asked to reconnect spread over this many seconds */
  DRAIN_SECONDS: z.coerce.number().int().min(0).max(300).default(10),
}).superRefine((c, ctx) => {
  if (c.GATEWAY_HEAP_GROWING_PERCENT !== undefined && c.GATEWAY_OPTIMIZE_FOR_SIZE) {
    ctx.addIssue({ code: 'custom', path: ['GATEWAY_HEAP_GROWING_PERCENT'], message: 'set only with GATEWAY_OPTIMIZE_FOR_SIZE=false (size mode sets its own heap growth)' });
  }
  if (c.GATEWAY_SIZE_MODE_BURST_JOINS !== undefined && !c.GATEWAY_OPTIMIZE_FOR_SIZE) {
    ctx.addIssue({ code: 'custom', path: ['GATEWAY_SIZE_MODE_BURST_JOINS'], message: 'set only with GATEWAY_OPTIMIZE_FOR_SIZE on (it suspends size mode during join bursts)' });
  }
  if ((c.TURN_URLS.length > 0) !== (c.TURN_SECRET !== undefined)) {
    ctx.addIssue({ code: 'custom', path: ['TURN_SECRET'], message: 'TURN_URLS and TURN_SECRET are set together' });
  }
});

export type Config = z.infer<typeof ConfigSchema>;

export class ConfigError extends Error {}

/** Parses the environment; throws a ConfigError naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const input: Record<string, string> = {};
  for (const key of Object.keys(ConfigSchema.shape)) {
    const v = env[key];
    if (v !== undefined && v !== '') input[key] = v;
  }
  const parsed = ConfigSchema.safeParse(input);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}
