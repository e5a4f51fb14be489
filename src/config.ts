import { z } from 'zod';
import { FLUSH_SECONDS_MAX, SESSION_IDLE_SECONDS_DEFAULT } from './metering/rules.js';

/**
 * Every setting of the service, parsed once at start-up. A bad value stops the
 * process with a message that names the variable (see `loadConfig`).
 * Each variable carries its meaning (`.describe`, or `.meta` with `tests` when
 * only tests are meant to change it): docs/configuration.md is generated from
 * this schema (`npx tsx src/configDoc.ts --write`), and a test fails when the
 * document is stale or a variable has no meaning.
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
  DATABASE_URL: z.string().url().default('postgres://postgres@127.0.0.1:5432/lessons')
    .describe('Postgres; the database is created at start if it does not exist'),
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10)
    .describe('connections per process for writes, transactions and long reads (reports): the `lessons` pool'),
  DATABASE_READ_POOL_SIZE: z.coerce.number().int().min(1).max(50).default(3)
    .describe('connections per process for short point reads (API GET routes and key lookups, the gateway\'s token checks, meter seeds, removal checks, board heads): the `lessons-read` pool, kept small so that postgres.js pipelines several queries per round trip under load'),
  REDIS_URL: z.string().url().default('redis://127.0.0.1:6379/0')
    .describe('Redis: presence, rate limits, pub/sub; nothing durable'),
  REDIS_KEY_PREFIX: z.string().default('wb:')
    .describe('prefix of every Redis key, so installations can share a Redis (no `{`: hash tags follow it)'),
  REDIS_CLUSTER_NODES: z.string().regex(/^(?:[^,\s:/[\]]+|\[[0-9a-fA-F:]+\]):\d+(?:\s*,\s*(?:[^,\s:/[\]]+|\[[0-9a-fA-F:]+\]):\d+)*$/, 'a comma list of host:port').default('')
    .describe('`host:port,host:port` of a Redis 7 Cluster (sharded pub/sub); `REDIS_URL` is then unused. Empty: the one Redis at `REDIS_URL` (docs/operations.md)'),
  ROLES: csv.pipe(z.array(z.enum(ROLE_NAMES)).min(1)).default(['api', 'gateway', 'dispatcher'])
    .describe('roles this process runs, comma-separated'),
  HOST: z.string().default('0.0.0.0')
    .describe('bind address of the API, the gateway and the metrics listener'),
  API_PORT: port.default(8080)
    .describe('port of the partner API (`/api/partner/v1`)'),
  GATEWAY_PORT: port.default(8081)
    .describe('port of the gateway: WebSocket `/ws`, participant pages `/embed/<token>`'),
  EMBED_BASE_URL: z.string().url().default('http://localhost:8081').transform((s) => s.replace(/\/+$/, ''))
    .describe('public address of the gateway; links are `${EMBED_BASE_URL}/embed/<token>`'),
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().positive().default(600)
    .describe('partner API requests per API key in any rolling 60 s (a sliding window shared through Redis)'),
  RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: z.coerce.number().int().positive().default(60)
    .describe('partner API requests per minute per client address without a valid key; 429 past it (docs/api-decisions.md)'),
  TRUST_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(0)
    .describe('reverse proxies in front of the API that append to `X-Forwarded-For`; the client address is the entry that many from the right. 0: the TCP peer (the header is ignored)'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info')
    .describe('pino log level'),
  // Realtime gateway
  SESSION_IDLE_SECONDS: seconds.default(SESSION_IDLE_SECONDS_DEFAULT)
    .meta({ description: 'a session ends after this long with nobody present (src/metering/rules.ts)', tests: 'Only tests shorten it.' }),
  GATEWAY_IDLE_TIMEOUT_SECONDS: z.coerce.number().int().min(8).max(30).default(20)
    .describe('a socket that answers no ping for this long is closed and stops counting as present'),
  GATEWAY_MAX_PAYLOAD_BYTES: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(65_536)
    .describe('a larger frame closes the socket with 4413'),
  GATEWAY_MAX_BACKPRESSURE_BYTES: z.coerce.number().int().min(16_384).default(1_048_576)
    .describe('a socket whose unsent data passes this is closed (a client that never reads)'),
  GATEWAY_MESSAGES_PER_SECOND: z.coerce.number().positive().default(50)
    .describe('per-connection message rate (token bucket)'),
  GATEWAY_MESSAGE_BURST: z.coerce.number().int().positive().default(100)
    .describe('size of that bucket; a client that sends a whole burst more while limited is closed with 4429'),
  GATEWAY_MAX_CONNECTIONS_PER_IP: z.coerce.number().int().positive().default(256)
    .describe('open or upgrading sockets per client address, per node; 429 at the upgrade past it'),
  GATEWAY_MAX_CONNECTIONS: z.coerce.number().int().min(0).default(0)
    .describe('open or upgrading sockets this node holds; past it an upgrade gets 503 `unavailable` with `Retry-After: 2` before its link is checked, and `/readyz` answers 503 `{"ready":false,"full":true}`. 0: the soft descriptor limit (`ulimit -n`) less both Postgres pools and a reserve of 64; 10,000 where it cannot be read (realtime/admission/ConnectionCap.ts). Logged at start and exported as `lessons_gateway_connection_cap`'),
  GATEWAY_OPTIMIZE_FOR_SIZE: flag('true')
    .describe('a process running the gateway tells V8 to favour memory over speed (`--optimize-for-size`, realtime/memory.ts): a held connection keeps several KB less RSS than with V8\'s defaults, for some CPU and join latency (docs/benchmarks.md). Logged at start'),
  GATEWAY_HEAP_GROWING_PERCENT: z.coerce.number().int().min(10).max(100).optional()
    .describe('with `GATEWAY_OPTIMIZE_FOR_SIZE=false` only (refused otherwise): V8 grows the old generation by at most this percent after a full collection (`--heap-growing-percent`), a middle ground between V8\'s defaults and size mode in memory and idle CPU. Unset: V8\'s own'),
  GATEWAY_SIZE_MODE_BURST_JOINS: z.coerce.number().int().min(0).optional()
    .describe('with size mode on only (refused otherwise): while sockets arrive at this many per second or more (counted every 200 ms) size mode is suspended, since its collections would pause the joins; it resumes 2 s after the rate falls below. 0: never suspended. Unset: 100. Each change is logged'),
  GATEWAY_MAX_SOCKETS_PER_PERSON: z.coerce.number().int().min(1).max(64).default(4)
    .describe('open sockets of one person (every link of the same user) in one lesson, per node; a newer socket closes the oldest with 4409'),
  GATEWAY_PERSON_CURSORS_PER_SECOND: z.coerce.number().positive().default(30)
    .describe('cursor positions relayed per person per second, across their sockets on a node; the rest are dropped'),
  GATEWAY_PERSON_CURSOR_BURST: z.coerce.number().int().positive().default(60)
    .describe('the burst of that cursor budget'),
  GATEWAY_ALLOWED_ORIGINS: csv.default([])
    .describe('comma-separated `Origin`s allowed to open the socket (403 otherwise); empty: any'),
  GATEWAY_TRUST_PROXY: flag('false')
    .describe('take the client address from the right-most `X-Forwarded-For` entry (only behind our own proxy)'),
  GATEWAY_LEASE_SECONDS: z.coerce.number().int().min(3).max(15).default(10)
    .describe('node lease in Redis; a killed node\'s people stop counting within lease + lease/3'),
  GATEWAY_METER_FLUSH_SECONDS: z.coerce.number().min(0.2).max(FLUSH_SECONDS_MAX).default(5)
    .describe('how often running lessons are charged, so `GET /balance` is live'),
  GATEWAY_TOKEN_CACHE_SECONDS: z.coerce.number().int().min(0).max(60).default(10)
    .describe('how long a link looked up in Postgres is cached in the process; links announced when issued stay until they expire, and expiry is checked on every use (docs/protocol.md)'),
  // Webhooks
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000)
    .describe('total time of one delivery attempt, DNS to last byte read'),
  WEBHOOK_RETRY_SCHEDULE: csv
    .transform((xs) => xs.map(Number))
    .pipe(z.array(z.number().int().min(0)).min(1))
    .default([30, 120, 600, 1800, 3600, 10800, 21600, 43200])
    .meta({ description: 'seconds before attempts 2-9; after the last failure the event is undelivered', tests: 'Only tests shorten it.' }),
  WEBHOOK_ALLOW_HOSTS: csv.default([])
    .meta({ description: 'host names or IPs exempt from the https and public-address rules, for local development; a warning is logged at start when set', tests: 'Local development and tests only.' }),
  WEBHOOK_SECRET_KEYS: csv
    .pipe(z.array(z.string().refine((k) => Buffer.from(k, 'base64').length === 32, 'each key must be 32 bytes, base64')))
    .default([])
    .describe('comma-separated base64 AES-256 keys (32 bytes, e.g. `openssl rand -base64 32`) sealing webhook secrets and stored idempotent replies at rest; the first seals, all open (put a new key first to rotate). Empty: with `NODE_ENV=production` the API and the dispatcher do not start; otherwise they use the key in `SECRET_KEYS_FILE`, generated once'),
  SECRET_KEYS_FILE: z.string().min(1).default('.local/secret-keys')
    .describe('where a laptop\'s API or dispatcher keeps the sealing key it generates when `WEBHOOK_SECRET_KEYS` is empty (gitignored, mode 0600; the log names the file, never the key)'),
  NODE_ENV: z.string().default('development')
    .describe('`production` (the Docker image): `WEBHOOK_SECRET_KEYS` must be given to the API and the dispatcher'),
  WEBHOOK_POLL_MS: z.coerce.number().int().min(10).default(1000)
    .meta({ description: 'the dispatcher\'s poll: the backstop to LISTEN/NOTIFY and the clock for retries coming due', tests: 'Tests shorten it.' }),
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(256)
    .describe('delivery attempts in flight per dispatcher process'),
  WEBHOOK_PARTNER_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(8)
    .describe('attempts in flight per partner per dispatcher process, so one slow endpoint cannot hold up the others'),
  // Board (docs/board.md)
  BOARD_COMMIT_MAX_LESSONS: z.coerce.number().int().min(1).max(1000).default(100)
    .describe('most lessons whose waiting board operations a gateway node commits in one Postgres transaction'),
  BOARD_COMMIT_CONCURRENCY: z.coerce.number().int().min(1).max(16).default(2)
    .describe('board transactions a gateway node has in flight at once'),
  BOARD_PREVIEW_DEBOUNCE_MS: z.coerce.number().int().min(0).max(60_000).default(2000)
    .describe('a gateway renders a lesson\'s preview this long after its last board change on that node'),
  BOARD_PREVIEW_MIN_INTERVAL_MS: z.coerce.number().int().min(0).max(3_600_000).default(60_000)
    .describe('... but no sooner than this after its previous render of the lesson (at once when the last participant leaves the node)'),
  BOARD_PREVIEW_WIDTH: z.coerce.number().int().min(64).max(2048).default(800)
    .describe('width of the preview PNG in pixels'),
  // Bounded preview rendering (docs/board.md, "Bounded rendering"): the maxima keep queue + timeout within 10 s
  BOARD_RENDER_CONCURRENCY: z.coerce.number().int().min(1).max(16).default(1)
    .describe('preview renders at once per process, each in a child process of its own'),
  BOARD_RENDER_TIMEOUT_MS: z.coerce.number().int().min(100).max(6000).default(5000)
    .describe('a render still running after this long is killed; the read answers 503'),
  BOARD_RENDER_MEMORY_MB: z.coerce.number().int().min(64).max(4096).default(512)
    .describe('a render child whose resident memory passes this is killed; its V8 heap is capped at half'),
  BOARD_RENDER_QUEUE_MS: z.coerce.number().int().min(0).max(4000).default(4000)
    .describe('a render that finds no free slot within this long is refused: 503 with `Retry-After`'),
  // Notes as a PDF (docs/board.md, "Notes as a PDF"): an export runs in the same render pool, one slot for its whole time
  BOARD_EXPORT_TIMEOUT_MS: z.coerce.number().int().min(1000).max(120_000).default(30_000)
    .describe('a PDF export still running after this long is killed; the read answers 503 `unavailable`'),
  BOARD_EXPORT_MAX_ELEMENTS: z.coerce.number().int().min(1).max(20_000).default(10_000)
    .describe('a board with more live elements than this is not exported: 422 `export_too_large`'),
  BOARD_EXPORT_MAX_IMAGE_BYTES: z.coerce.number().int().min(0).max(1024 * 1024 * 1024).default(64 * 1024 * 1024)
    .describe('... nor one whose image files add up to more bytes than this'),
  BOARD_EXPORT_MAX_PDF_BYTES: z.coerce.number().int().min(1024).max(1024 * 1024 * 1024).default(64 * 1024 * 1024)
    .describe('... nor one whose PDF comes out larger than this'),
  BOARD_EXPORT_PER_MINUTE: z.coerce.number().int().min(1).max(10_000).default(20)
    .describe('PDF exports per minute per API key, and downloads per person from the participant page (429 beyond), within the general rate limits'),
  BOARD_RELAY_GAP_MS: z.coerce.number().int().min(10).max(60_000).default(1500)
    .meta({ description: 'how long a node waits for a missing board operation before its pages resync from Postgres', tests: 'Tests shorten it.' }),
  // Files on the board (docs/board.md, "Images and PDFs")
  FILE_MAX_BYTES: z.coerce.number().int().min(1024).max(100 * 1024 * 1024).default(10 * 1024 * 1024)
    .describe('largest file one upload may carry, in bytes (the request body; the stored re-encode counts against the lesson): 413 `too_large` beyond, before the body is read when its length says so'),
  FILE_LESSON_MAX_BYTES: z.coerce.number().int().min(1024).max(10 * 1024 * 1024 * 1024).default(100 * 1024 * 1024)
    .describe('stored bytes of all files of one lesson: 409 `lesson_full` beyond'),
  FILE_LESSON_MAX_FILES: z.coerce.number().int().min(1).max(100_000).default(500)
    .describe('files of one lesson: 409 `lesson_full` beyond'),
  FILE_UPLOADS_PER_MINUTE: z.coerce.number().int().min(1).max(10_000).default(60)
    .describe('uploads per person (across their tabs and the gateway\'s nodes) in any rolling minute: 429 `rate_limited` with `Retry-After` beyond'),
  FILE_MAX_PIXELS: z.coerce.number().int().min(1).max(268_402_689).default(40_000_000)
    .describe('decoded pixels (width x height, read from the header before decoding) above which an image is refused (422 `too_many_pixels`)'),
  FILE_PROCESS_CONCURRENCY: z.coerce.number().int().min(1).max(16).default(1)
    .describe('images a gateway process decodes and re-encodes at once (each may take ~4 bytes a pixel); the rest wait (an upload that waits 20 s for a slot gets 503)'),
  FILE_IMAGES: flag('true')
    .describe('whether this node takes image elements and uploads. `false`: it refuses them as a node of a release before images did, says so in `board.state` (`element_types`), and pages hold their images until they reach a node that takes them; for a rolling deploy from such a release (docs/operations.md, "Old and new gateways side by side")'),
  WEB_DIR: z.string().min(1).optional()
    .describe('folder of the built participant page the gateway serves (`npm run build` writes it). Unset: `dist/web` of this checkout'),
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
    .default([])
    .describe('WebRTC ICE servers as JSON, e.g. `[{"urls":"stun:turn.example.com:3478"}]`'),
  // TURN REST credentials (coturn use-auth-secret): per participant, docs/board.md "Video call"
  TURN_URLS: csv.pipe(z.array(z.string().regex(/^turns?:/, 'each URL must start with turn: or turns:'))).default([])
    .describe('TURN server URLs, comma-separated (`turn:`, `turns:`): with `TURN_SECRET`, each participant\'s `welcome` carries TURN credentials of their own (coturn `use-auth-secret`; docs/board.md, "Video call")'),
  TURN_SECRET: z.string().min(16, 'at least 16 characters').optional()
    .describe('the TURN server\'s shared secret (coturn `static-auth-secret`); set with `TURN_URLS` or not at all. Never logged'),
  TURN_TTL_SECONDS: z.coerce.number().int().min(2).max(86_400).default(600)
    .describe('lifetime of a participant\'s TURN credentials (never past their link\'s expiry); fresh ones are sent over the socket at half of it while the person is in the lesson, so a removed person\'s stop working within it'),
  // Operations (docs/operations.md)
  METRICS_PORT: port.optional()
    .describe('port of this process\'s Prometheus listener on `HOST`: `/metrics`, `/healthz`, `/readyz` (never the API or gateway port; keep it off the public network). Unset: no listener'),
  SHUTDOWN_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(300).default(15)
    .describe('on `SIGTERM` the API finishes requests in flight for at most this long, then cuts what is left'),
  DRAIN_SECONDS: z.coerce.number().int().min(0).max(300).default(10)
    .describe('the gateway\'s drain on `SIGTERM`: `/readyz` answers 503 at once, participants are told to reconnect (close code 1012) spread over at most this long, their departures count 3 s later; the process exits once empty or at this + 3 s (docs/operations.md)'),
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
