import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { SERVICE_VERSION } from '../../src/api/app.js';
import { startTestApi } from '../helpers/api.js';
import { partnerFactory } from '../helpers/factories.js';
import { typeCheck, typescriptBlocks } from '../helpers/typecheck.js';

const run = promisify(execFile);
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CLIENT = join(REPO, 'clients/ts');
const NAME = '@lesson-service/client';
const api = await startTestApi();

describe("the README's TypeScript", () => {
  it('type-checks as written against the client, each block as a module of its own', () => {
    const blocks = typescriptBlocks(readFileSync(join(REPO, 'README.md'), 'utf8'));
    expect(blocks.length).toBeGreaterThan(0);
    // it imports the client the way a partner does: by the package's name
    for (const b of blocks) if (b.includes('createLessonClient')) expect(b).toContain(`from '${NAME}'`);
    const files = Object.fromEntries(blocks.map((b, i) => [join(REPO, `README.block-${i + 1}.ts`), b]));
    expect(typeCheck(files, { paths: { [NAME]: 'clients/ts/src/index.ts' } })).toEqual([]);
  }, 60_000);
});

describe('the typed client as a package', () => {
  const dir = mkdtempSync(join(tmpdir(), 'client-package-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  /** npm pack's --json answer (after whatever the prepack script printed) */
  const packed = (stdout: string): { filename: string; files: { path: string }[] }[] => JSON.parse(stdout.slice(stdout.search(/^\[/m)));

  it('is packed by npm pack, installed from the tarball into an empty project, type-checks there and calls the API', async () => {
    // npm pack runs the package's prepack (its build): the tarball holds the built code and types only
    const [client] = packed((await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: CLIENT, timeout: 120_000 })).stdout);
    const paths = client.files.map((f) => f.path).sort();
    expect(paths).toEqual(expect.arrayContaining(['dist/index.js', 'dist/index.d.ts', 'dist/schema.d.ts', 'dist/verify.js', 'package.json']));
    expect(paths.filter((p) => !p.startsWith('dist/') && p !== 'package.json')).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(CLIENT, 'package.json'), 'utf8')) as { version: string; dependencies: Record<string, string> };
    expect(manifest.version, "the service's version, whose document the types come from").toBe(SERVICE_VERSION);
    expect(client.filename).toBe(`lesson-service-client-${manifest.version}.tgz`);

    // Its dependencies (and theirs) come packed from the repository's installed copies, the lock
    // file's versions, so the install needs no registry; npm resolves the client's ranges against them.
    const deps = new Set<string>();
    const collect = (names: string[]) => {
      for (const name of names) {
        if (deps.has(name)) continue;
        deps.add(name);
        collect(Object.keys((JSON.parse(readFileSync(join(REPO, 'node_modules', name, 'package.json'), 'utf8')) as { dependencies?: object }).dependencies ?? {}));
      }
    };
    collect(Object.keys(manifest.dependencies));
    const depArgs = [...deps].map((d) => join(REPO, 'node_modules', d));
    const depTarballs = packed((await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir, ...depArgs], { timeout: 120_000 })).stdout);

    const app = join(dir, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'partner-app', private: true, type: 'module' }));
    const tarballs = [client, ...depTarballs].map((t) => join(dir, t.filename));
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', ...tarballs], { cwd: app, timeout: 120_000 });
    const installed = join(app, 'node_modules', NAME);
    // every package its code imports is one it declares (or Node's own)
    for (const f of readdirSync(join(installed, 'dist')).filter((f) => f.endsWith('.js'))) {
      for (const [, spec] of readFileSync(join(installed, 'dist', f), 'utf8').matchAll(/\bfrom\s+'([^'.][^']*)'/g)) {
        if (!spec.startsWith('node:')) expect(Object.keys(manifest.dependencies), `${f} imports ${spec}`).toContain(spec);
      }
    }

    // one real call, from a program in the partner's project importing the package by its name
    const p = await partnerFactory(api.deps.sql);
    writeFileSync(
      join(app, 'call.js'),
      `import { createLessonClient, parseWebhook } from '${NAME}';
const api = createLessonClient({ baseUrl: process.env.BASE_URL, apiKey: process.env.API_KEY });
const { data, response } = await api.GET('/balance');
console.log(JSON.stringify({ status: response.status, data, parseWebhook: typeof parseWebhook }));\n`,
    );
    const { stdout } = await run(process.execPath, ['call.js'], { cwd: app, env: { ...process.env, BASE_URL: `${api.base}/api/partner/v1`, API_KEY: p.apiKey }, timeout: 30_000 });
    expect(JSON.parse(stdout)).toMatchObject({ status: 200, data: { balance_seconds: expect.any(Number) }, parseWebhook: 'function' });

    // and its types come with it: a partner's TypeScript compiles against the installed package, and a
    // path the API does not have fails (the types are not `any`)
    const consumer = `import { createLessonClient, isValidationError, type Lesson } from '${NAME}';
const api = createLessonClient({ baseUrl: 'https://lessons.example/api/partner/v1', apiKey: 'wbk_x' });
const { data, error } = await api.GET('/lessons/{id}', { params: { path: { id: 'lsn_1' } } });
if (error) throw new Error(isValidationError(error) ? error.detail[0].msg : \`\${error.detail.code} (request \${error.request_id})\`);
export const lesson: Lesson = data;
// @ts-expect-error: not a path of the API
await api.GET('/lesson');\n`;
    expect(typeCheck({ [join(app, 'consumer.ts')]: consumer })).toEqual([]);
  }, 300_000);
});
