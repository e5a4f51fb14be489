import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { testEnv } from '../helpers/deps.js';

/**
 * Surviving lost connections must not turn into surviving everything: an
 * uncaught exception still ends a service process with a non-zero code (so a
 * supervisor restarts it), logged first as `fatal`.
 */
describe('an unexpected exception', () => {
  it('ends the service process with exit code 1 after a fatal log line', async () => {
    const fixture = path.join(import.meta.dirname, 'fixtures/throwLater.mjs');
    const child = spawn(process.execPath, ['--import', 'tsx', '--import', fixture, 'src/main.ts'], {
      env: { ...process.env, ...testEnv({ ROLES: 'api', LOG_LEVEL: 'info' }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    while (!out.includes('"partner API listening"') && child.exitCode === null) await new Promise((r) => setTimeout(r, 50));
    child.kill('SIGUSR2');
    const code = await exited;
    expect(out).toMatch(/"partner API listening"/); // it was up, not failing to start
    expect(code).toBe(1);
    expect(out).toMatch(/"level":60.*"msg":"fatal: the process exits"/);
  }, 40_000);
});
