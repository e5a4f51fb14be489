import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { testEnv } from '../helpers/deps.js';
import { isolatedEnv } from '../helpers/isolation.js';

/**
 * Every command the README and docs/development.md give a newcomer answers:
 * a program with options prints them on `--help`, the others start or do
 * their work once. A command that needs minutes (the build, the whole suite,
 * docker compose) or runs elsewhere is named with the test that runs it
 * (COVERED_ELSEWHERE, OTHER_COMMANDS).
 */
const ROOT = new URL('../../', import.meta.url).pathname;

type Run = { code: number | null; out: string };

function run(cmd: string, args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${cmd} ${args.join(' ')} did not end within ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/** npm scripts whose `--help` lists their options, and an option each must list. */
const HELP: Record<string, string> = {
  loadtest: '--connections',
  'bench:webhooks': '--backlog',
  'bench:reports': 'BENCH_SESSIONS',
  'bench:board': 'PARTS',
  'bench:board:stroke': 'POINTS',
  'bench:board:reload': 'RELOADS',
  'bench:board:export': 'ROUNDS',
  'bench:files': 'ROUNDS',
  'bench:pointers': 'MOVE_MS',
  'bench:lessons': '--requests',
  'soak:board': '--seed',
  'bench:board:replay': '--ops',
  chaos: '--only',
};

/** Scripts run here otherwise, or by the test named. */
const COVERED_ELSEWHERE: Record<string, string> = {
  'bench:api': 'its program is run here with --help (the script builds with tsc first)',
  admin: 'its program is run here with --help; test/api/admin.test.ts runs every command',
  migrate: 'run here on a database of its own',
  start: 'npm run build, then dist/src/main.js: every spawnService and spawnGateway test runs it when the build is current (test/helpers/entry.ts)',
  dev: 'src/main.ts under tsx: test/faults/fatal.test.ts, test/api/config.test.ts (and every spawned service when the build is older than the sources)',
  build: 'CI (.ci/run) runs it before npm test',
  'build:web': 'test/board/web.ts runs the same build (web/build.ts) for the browser tests',
  typecheck: 'CI and every commit',
  test: 'the suite itself',
  'test:full': 'the suite at full length (TEST_FULL=1, test/helpers/length.ts)',
  'test:outage': 'test/board/connection.browser.test.ts at full length',
  'client:generate': 'test/api/client.test.ts checks what it writes (generateSchema)',
  postinstall: 'npm ci',
  prestart: 'npm start',
};

/** The other commands the docs give (`npx tsx <file>`, docker compose), and what runs them. */
const OTHER_COMMANDS: Record<string, string> = {
  'web/dev/server.ts': 'started here',
  'src/configDoc.ts': 'run here without --write (it exits 1 when docs/configuration.md is stale)',
  'realtime/protocol/describe.ts': 'test/realtime/protocolDoc.test.ts compares docs/protocol.md with what --write writes',
  'clients/ts/examples/integration.ts': 'test/api/client.test.ts runs it against the service',
  'bench/gateway/heapSummary.ts': 'run here with --help',
  'docker compose': 'test/ops/compose.test.ts validates docker-compose.yml; test/ops/proxy.test.ts runs its proxy',
};

const packageScripts = (JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { scripts: Record<string, string> }).scripts;
const scripts = Object.keys(packageScripts);

/** Runs `fns` at most `n` at a time (the machine has two cores). */
async function limited<T>(n: number, fns: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < fns.length) {
      const i = next++;
      out[i] = await fns[i]();
    }
  }));
  return out;
}

describe('the documented commands', () => {
  it('every npm script is run here or by a named test, and every one the docs name exists', () => {
    for (const s of scripts) expect(s in HELP || s in COVERED_ELSEWHERE, `npm run ${s} has no test of its command`).toBe(true);
    const docs = ['README.md', 'docs/development.md', 'docs/testing.md', 'docs/operations.md'].map((f) => readFileSync(`${ROOT}${f}`, 'utf8')).join('\n');
    const named = new Set([...docs.matchAll(/npm run (?:--silent )?([a-z][\w:]*[a-z])(?![\w:*])/g)].map((m) => m[1]));
    for (const s of named) expect(scripts, `the docs name npm run ${s}`).toContain(s);
    const others = [...docs.matchAll(/npx tsx (\S+\.ts)/g)].map((m) => m[1]);
    if (docs.includes('docker compose')) others.push('docker compose');
    for (const c of others) expect(OTHER_COMMANDS, `the docs give ${c} and nothing runs it`).toHaveProperty([c]);
  });

  it('finds docs/configuration.md up to date, as its generator run without --write says', async () => {
    const r = await run(process.execPath, ['--import', 'tsx', 'src/configDoc.ts']);
    expect(r.code, r.out).toBe(0);
  }, 60_000);

  it('answers --help with its options, exit code 0', async () => {
    // the script's own program under node, as npm would start it (npm itself adds seconds on a loaded machine)
    const program = (script: string) => {
      const m = /(?:^|&& )tsx (\S+)$/.exec(packageScripts[script]);
      if (!m) throw new Error(`npm run ${script} is not \`tsx <file>\`: ${packageScripts[script]}`);
      return m[1];
    };
    const cases: [string, string, string][] = [
      ...Object.entries(HELP).map(([s, option]) => [`npm run ${s}`, program(s), option] as [string, string, string]),
      ['npm run bench:api', program('bench:api'), '--connections'],
      ['heapSummary', 'bench/gateway/heapSummary.ts', '--by-referrer'],
      ['the page dev server', 'web/dev/server.ts', 'SUBJECT'],
      ['npm run admin', program('admin'), 'partner create --name <name>'],
    ];
    const runs = await limited(2, cases.map(([, file]) => () => run(process.execPath, ['--import', 'tsx', file, '--help'])));
    runs.forEach((r, i) => {
      const [name, , option] = cases[i];
      expect(r.out, name).toContain(option);
      expect(r.code, `${name}:\n${r.out}`).toBe(0);
    });
    // about 2 s a program on a quiet machine; the bound is for a machine shared by many test runs
  }, 300_000);

  it('migrate applies the migrations to an empty database and exits 0', async () => {
    const env = await isolatedEnv();
    const r = await run('npm', ['run', '--silent', 'migrate'], testEnv({ ...env, LOG_LEVEL: 'info' }));
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('migrations up to date');
  }, 60_000);

  it('web/dev/server.ts starts, prints a teacher link that opens the page, and stops on SIGTERM', async () => {
    const env = testEnv({ ...(await isolatedEnv()), PORT: '0', LOG_LEVEL: 'warn' });
    const child = spawn(process.execPath, ['--import', 'tsx', 'web/dev/server.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      const teacher = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (d) => {
          out += d;
          const m = /^teacher: (\S+)$/m.exec(out);
          if (m) resolve(m[1]);
        });
        void exited.then((code) => reject(new Error(`the dev server exited (${code}):\n${out}`)));
      });
      const page = await fetch(teacher);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<html');
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);
});
