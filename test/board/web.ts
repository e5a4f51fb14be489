import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const INPUTS = ['web/src', 'web/static', 'web/build.ts', 'src/board/schema.ts', 'src/board/reducer.ts', 'src/board/history.ts', 'realtime/protocol', 'src/domain/enums.ts', 'src/board/limits.ts', 'src/board/errors.ts', 'package-lock.json'];

function files(p: string): string[] {
  const full = path.join(ROOT, p);
  if (!statSync(full).isDirectory()) return [p];
  return readdirSync(full, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)))
    .sort();
}

/**
 * The participant page built from the current sources, for tests: built once
 * per content of its inputs into a folder of the system's temp dir (named by
 * their hash, so test files and runs share it), never into dist/web, which a
 * developer's gateway may be serving. Takes ~20 s when the sources changed; the
 * test files that start at the same moment wait for one build (a lock folder)
 * instead of each building it on the same two cores.
 */
export function builtWeb(): string {
  const hash = createHash('sha256');
  for (const f of INPUTS.flatMap(files)) hash.update(f).update(readFileSync(path.join(ROOT, f)));
  const dir = path.join(os.tmpdir(), `lesson-web-${hash.digest('hex').slice(0, 16)}`);
  const manifest = path.join(dir, 'manifest.json');
  if (existsSync(manifest)) return dir;
  const lock = `${dir}.lock`;
  if (!takeLock(lock)) {
    // another test file builds it: wait for its result (a builder that died leaves a stale lock, taken over)
    while (!existsSync(manifest) && existsSync(lock) && !stale(lock)) sleepSync(250);
    if (existsSync(manifest)) return dir;
    rmSync(lock, { recursive: true, force: true });
    return builtWeb();
  }
  try {
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'lesson-web-build-'));
    execFileSync('npx', ['tsx', 'web/build.ts'], { cwd: ROOT, env: { ...process.env, WEB_OUT: tmp }, stdio: 'pipe' });
    try {
      renameSync(tmp, dir);
    } catch {
      rmSync(tmp, { recursive: true, force: true }); // built meanwhile by a builder that took over a lock it thought stale
    }
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
  return dir;
}

function takeLock(lock: string): boolean {
  try {
    mkdirSync(lock);
    return true;
  } catch {
    return false;
  }
}

/** a build takes well under a minute even on a loaded machine; a lock this old was left by a killed builder */
const stale = (lock: string) => {
  try {
    return Date.now() - statSync(lock).mtimeMs > 180_000;
  } catch {
    return false;
  }
};

const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Debian's Chromium (never a downloaded browser: .ci/run installs the packages). The tests drive
 * its headless shell (package chromium-headless-shell, the "old headless" build playwright itself
 * prefers for headless runs): the same engine without the browser's own UI, about a third quicker
 * on two cores. `full` is the browser a person runs, for what the shell does differently (it
 * re-salts camera ids on every load) and for the benchmarks' latency figures.
 */
export const CHROMIUM = { shell: '/usr/bin/chromium-headless-shell', full: '/usr/bin/chromium' } as const;

/**
 * Debian's Chromium, headless, as the browser tests and the board benchmarks
 * drive it: root needs --no-sandbox, and the background-networking flags keep
 * it from calling out of a machine with no network. playwright's launch()
 * always starts from a fresh temporary profile. `fakeMedia`: a fake camera and
 * microphone, granted without a prompt (call tests).
 */
export async function launchChromium(opts: { fakeMedia?: boolean; build?: keyof typeof CHROMIUM } = {}): Promise<Browser> {
  const executablePath = CHROMIUM[opts.build ?? 'shell'];
  const pkg = opts.build === 'full' ? 'chromium' : 'chromium-headless-shell';
  if (!existsSync(executablePath)) throw new Error(`${executablePath} is missing: install Debian's ${pkg} (apt-get install -y ${pkg}; .ci/run does it)`);
  return chromium.launch({
    executablePath,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync',
      ...(opts.fakeMedia ? ['--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream'] : []),
    ],
  });
}
