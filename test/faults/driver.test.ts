import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';

/**
 * postgres.js as installed is the patched one (patches/postgres+3.4.9.patch),
 * and the patch keeps a process alive when Postgres drops its backends at the
 * two moments where 3.4.9 otherwise ends the process.
 */
const root = path.resolve(import.meta.dirname, '../..');
const patchFile = path.join(root, 'patches/postgres+3.4.9.patch');

/** The lines each patched file must contain: the patch's added lines, per file. */
function addedLines(): Map<string, string[]> {
  const files = new Map<string, string[]>();
  let current: string[] | null = null;
  for (const line of readFileSync(patchFile, 'utf8').split('\n')) {
    const header = /^\+\+\+ b\/(.+)$/.exec(line);
    if (header) {
      current = [];
      files.set(header[1], current);
    } else if (current && line.startsWith('+') && line.slice(1).trim() !== '') {
      current.push(line.slice(1));
    }
  }
  return files;
}

function runCase(mode: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = path.join(import.meta.dirname, 'fixtures/driverResets.mjs');
  return new Promise((resolve) => {
    execFile(process.execPath, [script, mode, inject('databaseUrl')], { cwd: root, timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('postgres.js patch', () => {
  it('every line the patch adds is in the installed postgres.js (esm, cjs and cf builds)', () => {
    const files = addedLines();
    expect([...files.keys()].sort()).toEqual([
      'node_modules/postgres/cf/src/connection.js',
      'node_modules/postgres/cf/src/queue.js',
      'node_modules/postgres/cjs/src/connection.js',
      'node_modules/postgres/cjs/src/queue.js',
      'node_modules/postgres/src/connection.js',
      'node_modules/postgres/src/queue.js',
    ]);
    // the copy Node resolves for `import 'postgres'` is the one checked
    const resolved = createRequire(import.meta.url).resolve('postgres');
    expect(path.relative(root, resolved)).toMatch(/^node_modules\/postgres\//);
    for (const [file, lines] of files) {
      const installed = readFileSync(path.join(root, file), 'utf8');
      const missing = lines.filter((l) => !installed.includes(l));
      expect(missing, file).toEqual([]);
    }
  });

  it('the Docker image applies the patch: patches/ is copied before npm ci, and the build checks a patched line', () => {
    const lines = readFileSync(path.join(root, 'Dockerfile'), 'utf8').split('\n');
    const copy = lines.findIndex((l) => /^COPY patches\b/.test(l));
    const ci = lines.findIndex((l) => /^RUN npm ci\b/.test(l));
    expect(copy).toBeGreaterThanOrEqual(0);
    expect(copy).toBeLessThan(ci);
    expect(lines.slice(ci, ci + 3).join('\n')).toMatch(/grep -q 'return closedWrite\(\)' node_modules\/postgres\/src\/connection\.js/);
    expect(readFileSync(path.join(root, 'node_modules/postgres/src/connection.js'), 'utf8')).toContain('return closedWrite()');
  });

  it('a transaction whose backend is terminated mid-query fails with CONNECTION_CLOSED and the process lives on', async () => {
    const r = await runCase('transaction');
    expect(r.stderr).not.toMatch(/TypeError/);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ rejected: 'CONNECTION_CLOSED', after: 1 });
  });

  it('a query that fails after some of its rows: the next query on the connection gets its own rows, not holes first', async () => {
    const r = await runCase('midstream');
    expect(r.code).toBe(0);
    // unpatched: [null, null, null, {x: 1}, {x: 2}]
    expect(JSON.parse(r.stdout)).toEqual({ failed: '22012', next: [{ x: 1 }, { x: 2 }], length: 2 });
  });

  it('a backend terminated in the middle of a result: the queries after the reconnect neither inherit its error nor its rows', async () => {
    const r = await runCase('cut');
    expect(r.code).toBe(0);
    // unpatched: first "error 57P01" (the old backend's), second [null, {x: 1}, {x: 2}]
    expect(JSON.parse(r.stdout)).toEqual({ cut: 'CONNECTION_CLOSED', first: [{ x: 1 }, { x: 2 }], second: [{ x: 1 }, { x: 2 }] });
  });

  it('a backend terminated while the connection fetches array types: it reconnects, the first query succeeds, nothing is left unhandled', async () => {
    const r = await runCase('types');
    expect(r.stderr).not.toMatch(/57P01|unhandled/i);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ held: true, first: 1, second: 2 });
  });
});
