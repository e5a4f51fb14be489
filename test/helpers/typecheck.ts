import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Type-checks TypeScript sources as a partner's project would (strict, ES modules, Node's module
 * resolution) and answers the compiler's messages, one line each ([] when it compiles).
 * `files` maps absolute paths to their text: they need not exist on disk, and a `.ts` file is an
 * ES module when the nearest package.json on disk says `"type": "module"`. `paths` maps a package
 * name to a source file instead of node_modules (the README's import of the client).
 */
export function typeCheck(files: Record<string, string>, opts: { paths?: Record<string, string> } = {}): string[] {
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
    typeRoots: [resolve(REPO, 'node_modules/@types')],
    ...(opts.paths ? { baseUrl: REPO, paths: Object.fromEntries(Object.entries(opts.paths).map(([k, v]) => [k, [v]])) } : {}),
  };
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (f) => f in files || fileExists.call(host, f);
  host.readFile = (f) => files[f] ?? readFile.call(host, f);
  host.getSourceFile = (f, lang, ...rest) => (f in files ? ts.createSourceFile(f, files[f], lang) : getSourceFile.call(host, f, lang, ...rest));
  const program = ts.createProgram(Object.keys(files), options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : '';
    return where + ts.flattenDiagnosticMessageText(d.messageText, '\n');
  });
}

/** The TypeScript code blocks of a Markdown text (```ts ... ```), in order. */
export function typescriptBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```(?:ts|typescript)\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}
