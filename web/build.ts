/**
 * `npm run build:web`: bundles the participant page (web/src) with esbuild into
 * dist/web, ready for the gateway to serve (docs/board.md, "Serving the page"):
 *
 *   dist/web/index.html            the page for GET /embed/<token> (Cache-Control: no-store)
 *   dist/web/replay.html           the read-only replay page for GET /replay/<token>
 *   dist/web/errors/<kind>.html    expired / unknown / archived / removed link pages, and notfound (404)
 *   dist/web/assets/*              content-hashed JS, CSS, KaTeX fonts (cache for a year, immutable),
 *                                  with .br and .gz variants of the text files
 *   dist/web/assets/excalidraw/    Excalidraw's fonts, loaded at run time via EXCALIDRAW_ASSET_PATH
 *   dist/web/manifest.json         what is where
 *
 * Everything, fonts included, is served from our own origin: the page works without the internet.
 */
import { build, type Plugin } from 'esbuild';
import { cp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import zlib from 'node:zlib';

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** WEB_OUT: another output folder (the browser tests build into a temporary one). */
const out = process.env.WEB_OUT ? path.resolve(process.env.WEB_OUT) : path.join(root, 'dist', 'web');
const assets = path.join(out, 'assets');
/** URL path the gateway serves dist/web/assets under. */
const PUBLIC_PATH = '/web/assets';

/**
 * Fixes to Excalidraw's prod bundle, applied as esbuild loads it. Each must be found exactly once,
 * or the build fails (a new Excalidraw version: look again).
 */
const EXCALIDRAW_FIXES: { what: string; find: RegExp; replace: string; found: number }[] = [
  {
    // Excalidraw lists a CDN copy of every font (esm.sh) after the one under EXCALIDRAW_ASSET_PATH
    // (ExcalidrawFontFace.createUrls). Our CSP blocks it, and Chromium logged a CSP error for each
    // (~230 on load). The fallback base becomes our own asset path, so every font URL is on our origin.
    what: 'the CDN font fallback',
    find: /`https:\/\/esm\.sh\/\$\{.*?"@excalidraw\/excalidraw"\}\/dist\/prod\/`/g,
    replace: '(typeof window<"u"&&typeof window.EXCALIDRAW_ASSET_PATH=="string"?window.EXCALIDRAW_ASSET_PATH:location.origin+"/")',
    found: 0,
  },
  {
    // Excalidraw 0.18's History.clear() empties both stacks without telling its listeners, so the
    // Undo and Redo buttons stayed enabled (and did nothing) after the page cleared the history on a
    // page switch or resync (web/src/board/Board.tsx clearHistory). It now announces the empty
    // stacks as record() and undo() do.
    what: 'History.clear()',
    find: /clear\(\)\{this\.undoStack\.length=0,this\.redoStack\.length=0\}/g,
    replace: 'clear(){this.undoStack.length=0,this.redoStack.length=0,this.onHistoryChangedEmitter.trigger({isUndoStackEmpty:!0,isRedoStackEmpty:!0})}',
    found: 0,
  },
  {
    // Excalidraw's laser trails run an animation frame loop for the collaborators' lasers from the
    // editor's mount to its unmount, whether anyone points a laser or not, so an idle board page
    // asks for 60 frames a second (about nine times the CPU of a page without it: a phone's
    // battery). The loop stops while no collaborator holds the laser ...
    what: "the collaborators' laser loop",
    find: /onFrame\(\)\{this\.updateCollabTrails\(\)\}/g,
    replace: 'onFrame(){this.updateCollabTrails();for(let c of this.app.state.collaborators.values())if(c.pointer?.tool==="laser")return!1;return!0}',
    found: 0,
  },
  {
    // ... and starts again when the page hands the editor collaborators of whom one holds the laser (updateScene).
    what: 'the collaborators update',
    find: /\.collaborators&&this\.setState\(\{collaborators:(\w+)\.collaborators\}\)/g,
    replace:
      '.collaborators&&(this.setState({collaborators:$1.collaborators}),[...$1.collaborators.values()].some(c=>c.pointer?.tool==="laser")&&this.animationFrameHandler.start(this.laserTrails))',
    found: 0,
  },
];
const excalidrawFixes: Plugin = {
  name: 'excalidraw-fixes',
  setup(b) {
    b.onLoad({ filter: /[\\/]@excalidraw[\\/]excalidraw[\\/]dist[\\/]prod[\\/].*\.js$/ }, async (args) => {
      let code = await readFile(args.path, 'utf8');
      for (const fix of EXCALIDRAW_FIXES)
        code = code.replace(fix.find, (...match: string[]) => {
          fix.found++;
          return fix.replace.replace(/\$(\d)/g, (_, i: string) => match[Number(i)]);
        });
      return { contents: code, loader: 'js' };
    });
  },
};

await rm(out, { recursive: true, force: true });
await mkdir(assets, { recursive: true });

const result = await build({
  entryPoints: { app: path.join(root, 'web', 'src', 'main.tsx'), replay: path.join(root, 'web', 'src', 'replay', 'main.tsx') },
  bundle: true,
  splitting: true,
  format: 'esm',
  target: ['chrome100', 'firefox100', 'safari15'],
  outdir: assets,
  entryNames: '[name]-[hash]',
  chunkNames: 'chunk-[hash]',
  assetNames: '[name]-[hash]',
  publicPath: PUBLIC_PATH,
  minify: true,
  sourcemap: 'linked',
  metafile: true,
  jsx: 'automatic',
  define: { 'process.env.NODE_ENV': '"production"', 'import.meta.env.DEV': 'false', 'import.meta.env.PROD': 'true', 'import.meta.env.MODE': '"production"' },
  conditions: ['production'],
  loader: { '.woff2': 'file', '.woff': 'file', '.ttf': 'file', '.png': 'file', '.svg': 'file' },
  legalComments: 'linked',
  logLevel: 'warning',
  plugins: [excalidrawFixes],
});
for (const fix of EXCALIDRAW_FIXES)
  if (fix.found !== 1) throw new Error(`web/build.ts: Excalidraw's ${fix.what} found ${fix.found} times, expected once`);

// The font path for Excalidraw, as a classic script that runs before the module bundle (web/src/assetPath.ts).
const boot = await build({
  entryPoints: { boot: path.join(root, 'web', 'src', 'assetPath.ts') },
  bundle: true,
  format: 'iife',
  target: ['chrome100', 'firefox100', 'safari15'],
  outdir: assets,
  entryNames: '[name]-[hash]',
  minify: true,
  metafile: true,
  logLevel: 'warning',
});
const bootJs = `${PUBLIC_PATH}/${path.basename(Object.keys(boot.metafile.outputs)[0])}`;

/** The JS and CSS of one entry (its source path relative to the root). */
function entryFiles(source: string): { js: string; css: string } {
  const entry = Object.entries(result.metafile.outputs).find(([, o]) => o.entryPoint === source);
  if (!entry) throw new Error(`esbuild produced no entry chunk for ${source}`);
  const cssOut = entry[1].cssBundle;
  if (!cssOut) throw new Error(`esbuild produced no CSS bundle for ${source}`);
  return { js: `${PUBLIC_PATH}/${path.basename(entry[0])}`, css: `${PUBLIC_PATH}/${path.basename(cssOut)}` };
}
const { js, css } = entryFiles('web/src/main.tsx');
const replay = entryFiles('web/src/replay/main.tsx');

// Excalidraw's fonts (woff2, ~14 MB incl. CJK subsets fetched only when needed).
const exFonts = path.join(root, 'node_modules', '@excalidraw', 'excalidraw', 'dist', 'prod', 'fonts');
await cp(exFonts, path.join(assets, 'excalidraw', 'fonts'), { recursive: true });

const index = (await readFile(path.join(root, 'web', 'static', 'index.html'), 'utf8')).replace('{{JS}}', js).replace('{{CSS}}', css).replace('{{BOOT}}', bootJs);
await writeFile(path.join(out, 'index.html'), index);
// the replay page (GET /replay/<token>): a second entry, the same Excalidraw rendering, read-only
// (the participant page's template without its socket, which the replay never opens)
const replayHtml = (await readFile(path.join(root, 'web', 'static', 'index.html'), 'utf8'))
  .replace(/\n\s*<!-- the gateway's WebSocket[^\n]*\n\s*<meta name="lesson-socket"[^\n]*/, '')
  .replace('<title>Lesson</title>', '<title>Lesson replay</title>')
  .replace('{{JS}}', replay.js)
  .replace('{{CSS}}', replay.css)
  .replace('{{BOOT}}', bootJs);
if (replayHtml.includes('lesson-socket')) throw new Error('web/build.ts: the replay page kept the participant page\'s socket');
await writeFile(path.join(out, 'replay.html'), replayHtml);

const errorTemplate = await readFile(path.join(root, 'web', 'static', 'error.html'), 'utf8');
await writeFile(path.join(out, 'error.html'), errorTemplate);
const ERRORS: Record<string, [string, string, string]> = {
  unknown: ['?', 'This link does not work', 'The link is not valid. Ask your teacher or the platform for a new link to the lesson.'],
  expired: ['!', 'This link has expired', 'Links work for a limited time. Ask your teacher or the platform for a new link to the lesson.'],
  archived: ['✓', 'This lesson has ended', 'The lesson was closed by the platform. Its board can no longer be opened.'],
  removed: ['×', 'You were removed from the lesson', 'The teacher or the platform removed you from this lesson. This link cannot be used to enter it again.'],
  notfound: ['?', 'There is no page here', 'Open the lesson with the whole link you were given, or ask your teacher or the platform for a new one.'],
};
await mkdir(path.join(out, 'errors'));
for (const [kind, [icon, title, message]] of Object.entries(ERRORS)) {
  await writeFile(path.join(out, 'errors', `${kind}.html`), errorTemplate.replaceAll('{{ICON}}', icon).replaceAll('{{TITLE}}', title).replaceAll('{{MESSAGE}}', message));
}

// Precompressed variants the gateway serves to browsers that accept them (the bundle is ~3.5 MB of JS).
const COMPRESS = new Set(['.js', '.css', '.map', '.json', '.svg', '.ttf', '.txt']);
const toCompress: string[] = [];
for (const entry of await readdir(assets, { recursive: true, withFileTypes: true })) {
  if (entry.isFile() && COMPRESS.has(path.extname(entry.name))) toCompress.push(path.join(entry.parentPath, entry.name));
}
await Promise.all(
  toCompress.map(async (file) => {
    const body = await readFile(file);
    if (body.length < 1024) return;
    const [br, gz] = await Promise.all([
      brotli(body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 9, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length } }),
      gzip(body, { level: 9 }),
    ]);
    await Promise.all([writeFile(`${file}.br`, br), writeFile(`${file}.gz`, gz)]);
  }),
);

const manifest = { publicPath: PUBLIC_PATH, index: 'index.html', boot: bootJs, js, css, replay: { page: 'replay.html', ...replay }, errors: Object.keys(ERRORS).map((k) => `errors/${k}.html`), excalidrawAssetPath: `${PUBLIC_PATH}/excalidraw/` };
await writeFile(path.join(out, 'manifest.json'), JSON.stringify(manifest, null, 2));
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
console.log(`web: built ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1024 / 1024).toFixed(1)} MB -> ${path.relative(root, out) || out} (entry ${js})`);
