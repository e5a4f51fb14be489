import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const INPUTS = ['web/src', 'web/static', 'web/build.ts', 'src/board/schema.ts', 'src/board/protocol.ts', 'src/board/limits.ts', 'src/board/errors.ts', 'package-lock.json'];

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
 * developer's gateway may be serving. Takes ~20 s when the sources changed.
 */
export function builtWeb(): string {
  const hash = createHash('sha256');
  for (const f of INPUTS.flatMap(files)) hash.update(f).update(readFileSync(path.join(ROOT, f)));
  const dir = path.join(os.tmpdir(), `lesson-web-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(path.join(dir, 'manifest.json'))) return dir;
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'lesson-web-build-'));
  execFileSync('npx', ['tsx', 'web/build.ts'], { cwd: ROOT, env: { ...process.env, WEB_OUT: tmp }, stdio: 'pipe' });
  try {
    renameSync(tmp, dir);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another test file built it meanwhile
  }
  return dir;
}
