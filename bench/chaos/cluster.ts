import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chown, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { migrate } from '../../src/db/migrate.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { serviceMain } from '../../test/helpers/entry.js';
import { freePort, logPort, spawnUntilPort } from '../lib/service.js';

/**
 * The processes of a fault scenario, as an operator runs them: one API, two
 * gateways, one dispatcher (each its own process, `src/main.ts` with one role,
 * from the build when it is current: test/helpers/entry.ts), on a database of
 * its own and on a redis-server of its own (on a free port), which a scenario
 * may kill and start again. Every exit of a service process is
 * recorded (`exits`): no scenario expects one.
 */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BASE_DB = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/lessons';

// Whatever a run started dies with it, also when it is killed or times out mid-scenario.
const started = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of started) c.kill('SIGKILL');
});
function track(c: ChildProcess): ChildProcess {
  started.add(c);
  c.once('exit', () => started.delete(c));
  return c;
}

export type Role = 'api' | 'gw1' | 'gw2' | 'dispatcher';

export interface Exit {
  role: string;
  code: number | null;
  signal: string | null;
  /** what the scenario did to it (`kill -9`), or null for an exit nobody asked for */
  expected: string | null;
  tail: string;
}

export interface ServiceProc {
  role: string;
  proc: ChildProcess;
  port: number;
  lines: string[];
}

export class RedisServer {
  proc: ChildProcess | null = null;
  constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}/0`;
  }

  async start(): Promise<void> {
    const proc = track(spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' }));
    this.proc = proc;
    for (let i = 0; i < 100; i++) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}`);
      const { Redis } = await import('ioredis');
      const r = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      r.on('error', () => {});
      const ok = await r.connect().then(() => r.ping()).then(() => true, () => false);
      r.disconnect();
      if (ok) return;
      await new Promise((res) => setTimeout(res, 50));
    }
    throw new Error('redis-server did not start');
  }

  /** SIGKILL: every connection drops, the data (presence, leases) is gone, as after a crash. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await gone;
    this.proc = null;
  }
}

const execFileAsync = promisify(execFile);

/**
 * A Postgres server of a scenario's own: `initdb` into a temporary folder and
 * `pg_ctl` on a free port, from the Debian packages' binaries. A stop and start
 * of the server is a fault the shared server cannot take without the rest of
 * the suite (a crash, a restart for a minor upgrade, a failover). As root (CI
 * here) it runs as the `postgres` user, which initdb requires.
 */
export class PostgresServer {
  private dir = '';
  constructor(readonly port: number) {}

  /** A database URL on this server (`lessons` is only the base name: the Cluster makes its own database from it). */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/lessons`;
  }

  /** Runs one of the server's programs, as the postgres user when this process is root. */
  private async exec(program: 'initdb' | 'pg_ctl', args: string[]): Promise<void> {
    const bin = path.join(await postgresBinDir(), program);
    const asRoot = process.getuid?.() === 0;
    await execFileAsync(asRoot ? 'runuser' : bin, asRoot ? ['-u', 'postgres', '--', bin, ...args] : args, { timeout: 60_000 });
  }

  /** initdb (trust, no fsync) and start. */
  async init(): Promise<void> {
    this.dir = await mkdtemp(path.join(tmpdir(), 'chaos-pg-'));
    if (process.getuid?.() === 0) {
      const uid = Number(execFileSync('id', ['-u', 'postgres']).toString());
      const gid = Number(execFileSync('id', ['-g', 'postgres']).toString());
      await chown(this.dir, uid, gid);
    }
    await this.exec('initdb', ['-D', path.join(this.dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
    await this.start();
  }

  /** Starts the server and waits until it accepts connections. */
  async start(): Promise<void> {
    const opts = `-p ${this.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${this.dir} -c fsync=off -c max_connections=200`;
    await this.exec('pg_ctl', ['-D', path.join(this.dir, 'data'), '-l', path.join(this.dir, 'log'), '-o', opts, '-w', 'start']);
  }

  /** `immediate`: every process ends at once with no shutdown checkpoint, as in a crash (recovery runs at the next start); `fast`: a clean stop. */
  async stop(mode: 'immediate' | 'fast' = 'fast'): Promise<void> {
    await this.exec('pg_ctl', ['-D', path.join(this.dir, 'data'), '-m', mode, '-w', 'stop']);
  }

  /** Stops the server (if it runs) and removes its folder. */
  async destroy(): Promise<void> {
    if (!this.dir) return;
    await this.stop('immediate').catch(() => {});
    await rm(this.dir, { recursive: true, force: true });
    this.dir = '';
  }
}

/** The newest installed PostgreSQL's binaries (Debian: /usr/lib/postgresql/<version>/bin). */
async function postgresBinDir(): Promise<string> {
  const base = '/usr/lib/postgresql';
  const versions = (await readdir(base)).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) throw new Error(`no PostgreSQL under ${base}`);
  return path.join(base, versions[0], 'bin');
}

export class Cluster {
  readonly exits: Exit[] = [];
  readonly procs = new Map<string, ServiceProc>();
  private readonly expected = new Map<ChildProcess, string>();
  readonly dbUrl: string;
  readonly dbName: string;
  readonly prefix: string;
  redis!: RedisServer;

  /** `baseDb`: the Postgres to make the scenario's database on (default DATABASE_URL's server). */
  constructor(
    readonly env: Record<string, string> = {},
    baseDb = BASE_DB,
  ) {
    const run = `${Date.now().toString(36)}${randomBase62(4).toLowerCase()}`;
    const u = new URL(baseDb);
    this.dbName = `lessons_chaos_${run}`;
    u.pathname = `/${this.dbName}`;
    this.dbUrl = u.toString();
    this.prefix = `chaos:${run}:`;
  }

  serviceEnv(extra: Record<string, string> = {}): Record<string, string> {
    return {
      DATABASE_URL: this.dbUrl,
      REDIS_URL: this.redis.url,
      REDIS_KEY_PREFIX: this.prefix,
      HOST: '127.0.0.1',
      LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'warn',
      EMBED_BASE_URL: 'http://127.0.0.1',
      API_PORT: '0',
      GATEWAY_PORT: '0',
      WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      WEBHOOK_POLL_MS: '200',
      RATE_LIMIT_PER_MINUTE: '1000000',
      ...this.env,
      ...extra,
    };
  }

  /** The database (migrated) and the redis-server; no service process yet. */
  async prepare(): Promise<void> {
    await migrate(this.dbUrl);
    this.redis = new RedisServer(await freePort());
    await this.redis.start();
  }

  async start(roles: Role[] = ['api', 'gw1', 'gw2', 'dispatcher']): Promise<void> {
    await Promise.all(roles.map((r) => this.startRole(r)));
  }

  async startRole(role: Role): Promise<ServiceProc> {
    const role0 = role.startsWith('gw') ? 'gateway' : role;
    // the dispatcher has no port: its readiness is its log line, found at info level
    const ready =
      role0 === 'api' ? logPort('partner API listening') : role0 === 'gateway' ? logPort('gateway listening') : (line: string) => (line.includes('"webhook dispatcher running"') ? 1 : undefined);
    const lines: string[] = [];
    let proc!: ChildProcess;
    const { port } = await spawnUntilPort([serviceMain()], this.serviceEnv({ ROLES: role0, LOG_LEVEL: 'info' }), ready, {
      cwd: ROOT,
      timeoutMs: 60_000,
      onSpawn: (p) => (proc = track(p)),
      onLine: (l) => {
        if (/"level":(40|50|60)/.test(l) || !l.startsWith('{')) {
          lines.push(l);
          if (lines.length > 50) lines.shift();
        }
      },
    });
    proc.stderr!.on('data', (d: Buffer) => lines.push(d.toString()));
    proc.once('exit', (code, signal) => {
      this.exits.push({ role, code, signal, expected: this.expected.get(proc) ?? null, tail: lines.slice(-8).join('\n') });
      if (this.procs.get(role)?.proc === proc) this.procs.delete(role);
    });
    const sp = { role, proc, port, lines };
    this.procs.set(role, sp);
    return sp;
  }

  port(role: Role): number {
    const p = this.procs.get(role);
    if (!p) throw new Error(`${role} is not running`);
    return p.port;
  }

  /** kill -9 of one role, recorded as asked for. */
  async kill9(role: Role): Promise<void> {
    const p = this.procs.get(role);
    if (!p) return;
    this.expected.set(p.proc, 'kill -9');
    const gone = new Promise((r) => p.proc.once('exit', r));
    p.proc.kill('SIGKILL');
    await gone;
  }

  /** Exits nobody asked for. */
  unexpectedExits(): Exit[] {
    return this.exits.filter((e) => e.expected === null);
  }

  /** Terminates the service's Postgres backends (every pool, LISTEN and lock connection); returns how many. */
  async killBackends(admin: postgres.Sql, which: 'all' | 'lock' = 'all'): Promise<number> {
    const rows = await admin<{ n: number }[]>`
      SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
      WHERE datname = ${this.dbName} AND pid <> pg_backend_pid()
        AND ${which === 'lock' ? admin`application_name = 'lessons-dispatcher-lock'` : admin`application_name LIKE 'lessons%'`}`;
    return rows[0].n;
  }

  /** Stops everything (SIGTERM, then SIGKILL after 5 s) and drops the database unless `keep`. */
  async stop(keep = false): Promise<void> {
    await Promise.all(
      [...this.procs.values()].map(async (p) => {
        this.expected.set(p.proc, 'stop');
        if (p.proc.exitCode !== null || p.proc.signalCode !== null) return;
        const gone = new Promise((r) => p.proc.once('exit', r));
        p.proc.kill('SIGTERM');
        const t = setTimeout(() => p.proc.kill('SIGKILL'), 5_000);
        await gone;
        clearTimeout(t);
      }),
    );
    await this.redis?.kill();
    if (keep) return;
    const admin = new URL(this.dbUrl);
    admin.pathname = '/postgres';
    const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
    await sql.unsafe(`DROP DATABASE IF EXISTS "${this.dbName}" WITH (FORCE)`).catch(() => {});
    await sql.end();
  }
}

export { freePort };
