import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The sources under src/ and realtime/ whose compiled file in dist/ is missing or older than they
 * are. Empty: the build is current.
 */
export function staleBuild(root = ROOT): string[] {
  return ['src', 'realtime']
    .flatMap((dir) => readdirSync(path.join(root, dir), { recursive: true, withFileTypes: true }))
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => path.relative(root, path.join(e.parentPath, e.name)))
    .filter((rel) => {
      const js = path.join(root, 'dist', rel.replace(/\.ts$/, '.js'));
      return !existsSync(js) || statSync(js).mtimeMs < statSync(path.join(root, rel)).mtimeMs;
    });
}

let main: string | undefined;

/**
 * The file that starts the service (`src/main.ts`) in a child process. The build
 * (`dist/src/main.js`, what `npm start` and the image run, built by CI before `npm test`) starts in
 * 0.36-0.54 s against 0.59-0.94 s under tsx, and tests start dozens of processes. A build older
 * than any source is never what a test runs: then the sources run under tsx, said once on stderr.
 * TEST_FROM_SOURCE=1 runs the sources whatever the build.
 */
export function serviceMain(): string {
  if (main) return main;
  const stale = process.env.TEST_FROM_SOURCE === '1' ? [] : staleBuild();
  if (process.env.TEST_FROM_SOURCE !== '1' && stale.length === 0) return (main = path.join(ROOT, 'dist/src/main.js'));
  if (stale.length > 0) {
    process.stderr.write(
      `dist/ is missing or older than ${stale.length} source file(s) (${stale.slice(0, 3).join(', ')}): ` +
        'child processes run src/main.ts under tsx (slower); npm run build to start them from the build\n',
    );
  }
  return (main = path.join(ROOT, 'src/main.ts'));
}

/** The node arguments that start the service: serviceMain, through tsx when it is the source. */
export function serviceEntry(): string[] {
  return entryOf('src/main.ts');
}

/**
 * The node arguments that run another program of the sources (`src/cli/admin.ts`), by serviceMain's
 * rule: its compiled file in dist/ when the build is current, else the source under tsx.
 */
export function entryOf(source: string): string[] {
  if (serviceMain().endsWith('.js')) return [path.join(ROOT, 'dist', source.replace(/\.ts$/, '.js'))];
  return ['--import', 'tsx', path.join(ROOT, source)];
}
