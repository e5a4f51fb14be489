import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HttpReply } from '../api.js';

/** dist/web of this checkout, whether the gateway runs from realtime/ (tsx) or dist/realtime/ (compiled). */
export function defaultWebDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const root = here.includes(`${path.sep}dist${path.sep}`) ? path.resolve(here, '../../../..') : path.resolve(here, '../../..');
  return path.join(root, 'dist', 'web');
}

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.txt': 'text/plain; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};

/** Precompressed by web/build.ts next to the file; fonts in woff2 are compressed already. */
const ENCODINGS = [
  ['br', '.br'],
  ['gzip', '.gz'],
] as const;

const CACHE_BYTES = 96 * 1024 * 1024;

/**
 * The built page's assets (dist/web/assets), served at /web/assets/*. File
 * names carry content hashes (Excalidraw's fonts carry their package
 * version), so they are cached for a year as immutable. Bodies are read once
 * and kept in memory (the whole build is ~50 MB with source maps; the cache is
 * bounded), with the brotli or gzip variant when the client accepts it.
 */
export class StaticFiles {
  private readonly cache = new Map<string, Buffer>();
  private cached = 0;
  readonly assets: string;

  constructor(readonly dir: string) {
    this.assets = path.join(dir, 'assets');
  }

  get built(): boolean {
    return existsSync(path.join(this.dir, 'index.html'));
  }

  async asset(urlPath: string, acceptEncoding: string): Promise<HttpReply> {
    let rel: string;
    try {
      rel = decodeURIComponent(urlPath.replace(/^\/web\/assets\//, ''));
    } catch {
      return notFound();
    }
    const full = path.resolve(this.assets, rel);
    if (!full.startsWith(this.assets + path.sep) || rel.includes('\0')) return notFound();
    const type = TYPES[path.extname(full)];
    if (!type) return notFound();
    const headers: Record<string, string> = {
      'content-type': type,
      'cache-control': 'public, max-age=31536000, immutable',
      'x-content-type-options': 'nosniff',
      vary: 'accept-encoding',
    };
    for (const [enc, ext] of ENCODINGS) {
      if (!acceptEncoding.includes(enc)) continue;
      const body = await this.read(full + ext);
      if (body) return { status: 200, headers: { ...headers, 'content-encoding': enc }, body };
    }
    const body = await this.read(full);
    return body ? { status: 200, headers, body } : notFound();
  }

  /** A file of the build, or null. Hashed assets are kept in memory; pages (index, errors) are read each time, so a rebuild shows at once. */
  async read(full: string, keep = full.startsWith(this.assets + path.sep)): Promise<Buffer | null> {
    const hit = this.cache.get(full);
    if (hit) return hit;
    const st = await stat(full).catch(() => null);
    if (!st?.isFile()) return null;
    const body = await readFile(full);
    if (keep && this.cached + body.length <= CACHE_BYTES) {
      this.cache.set(full, body);
      this.cached += body.length;
    }
    return body;
  }
}

function notFound(): HttpReply {
  return { status: 404, headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }, body: 'not found' };
}
