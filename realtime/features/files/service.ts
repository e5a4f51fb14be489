import type { Deps } from '../../../src/deps.js';
import type { ResolvedLink } from '../../../src/domain/links.js';
import { checkImage } from '../../../src/board/files/check.js';
import { FileError, megabytes } from '../../../src/board/files/errors.js';
import { FILE_ID, PgFileStore, type FileInfo, type FileStore } from '../../../src/board/files/store.js';
import { RateLimiter } from '../../../src/lib/rateLimiter.js';
import type { LinkCheck } from '../../admission/Admission.js';
import type { HttpReply } from '../api.js';
import { personIdOf } from '../../admission/personId.js';
import { PAGE_CSP } from '../page/feature.js';
import { checkReplayToken } from '../replay/feature.js';

/** The link token travels in this header (never in a URL, which proxies and browsers log). */
export const TOKEN_HEADER = 'authorization';
const bearer = (h: string | undefined): string | undefined => /^Bearer\s+(\S+)$/i.exec(h ?? '')?.[1];

/**
 * The link of the `Authorization` header, checked as at the upgrade, and of this lesson (a
 * FileError otherwise): what every HTTP route of a participant (files, notes) asks first.
 */
export async function participantOf(checkLink: (token: string | undefined) => Promise<LinkCheck>, lessonId: string, headers: Record<string, string>): Promise<ResolvedLink> {
  const check = await checkLink(bearer(headers[TOKEN_HEADER]));
  if (!check.ok) throw new FileError(check.code === 'removed' ? 'removed' : check.status === 410 ? 'archived' : check.status === 503 ? 'unavailable' : 'unauthorized', check.message);
  if (check.link.lesson_id !== lessonId) throw new FileError('forbidden', 'This link is for another lesson');
  return check.link;
}

/** Retry-After of an upload to a node with images switched off (FILE_IMAGES): a page waits this long, or until it reconnects. */
const IMAGES_OFF_RETRY_S = 10;

/** How long an upload waits for a free slot to be checked before it is refused (503, try again). */
const PROCESS_QUEUE_MS = 20_000;

export const errorReply = (e: FileError): HttpReply => ({
  status: e.status,
  headers: {
    'content-type': 'application/json',
    'cache-control': 'no-store',
    ...(e.retryAfterS !== undefined ? { 'retry-after': String(e.retryAfterS) } : {}),
  },
  body: JSON.stringify({ detail: { code: e.code, message: e.message } }),
});

/** At most `n` at once; the others wait in order (each may hold a decoded image: bounded memory). */
class Slots {
  private busy = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly n: number) {}
  async run<T>(fn: () => Promise<T>, waitMs: number): Promise<T> {
    if (this.busy >= this.n) {
      let timer: NodeJS.Timeout | undefined;
      const turn = new Promise<void>((resolve, reject) => {
        const go = () => {
          clearTimeout(timer);
          resolve();
        };
        this.waiting.push(go);
        timer = setTimeout(() => {
          const i = this.waiting.indexOf(go);
          if (i >= 0) this.waiting.splice(i, 1);
          reject(new FileError('unavailable', 'The lesson is busy with other images: try again in a moment', 5));
        }, waitMs);
      });
      await turn;
    } else this.busy++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.busy--;
    }
  }
}

/**
 * Files recently served by this node, by lesson and id. Content-addressed bytes never change, so a
 * cached file is never stale: a class opening a lesson reads each file from Postgres once, not once
 * per person (the participant check still runs for every request). Least recently used out first.
 */
class FileCache {
  private readonly files = new Map<string, FileInfo & { data: Buffer }>();
  private bytes = 0;
  constructor(private readonly maxBytes: number) {}
  get(key: string): (FileInfo & { data: Buffer }) | undefined {
    const f = this.files.get(key);
    if (f) {
      this.files.delete(key);
      this.files.set(key, f);
    }
    return f;
  }
  set(key: string, f: FileInfo & { data: Buffer }): void {
    if (f.data.length > this.maxBytes / 8 || this.files.has(key)) return;
    this.files.set(key, f);
    this.bytes += f.data.length;
    for (const [k, old] of this.files) {
      if (this.bytes <= this.maxBytes) break;
      this.files.delete(k);
      this.bytes -= old.data.length;
    }
  }
}
const CACHE_BYTES = 64 * 1024 * 1024;

export interface UploadRequest {
  lessonId: string;
  headers: Record<string, string>;
  body: Buffer;
}

export interface FileRequest {
  lessonId: string;
  fileId: string;
  headers: Record<string, string>;
}

/**
 * Files on the board over HTTP, at the gateway (docs/protocol.md, "Files"):
 * `POST /files/<lesson>` keeps an image, `GET /files/<lesson>/<file>` serves
 * it, both with the participant's link token in `Authorization: Bearer` (a GET
 * also with a replay link's, for the replay page's images). The
 * link is checked as at the WebSocket upgrade (the same `checkLink`: unknown or
 * expired 401, archived 410, removed 403), and must be of the lesson the path
 * names (403 otherwise). Transport-free: realtime/server.ts reads the body
 * (at most FILE_MAX_BYTES) and writes the reply.
 */
export class FileService {
  readonly maxBytes: number;
  private readonly slots: Slots;
  private readonly rates: RateLimiter;
  private readonly prefix: string;
  private readonly cache = new FileCache(CACHE_BYTES);

  constructor(
    private readonly deps: Deps,
    private readonly checkLink: (token: string | undefined) => Promise<LinkCheck>,
    readonly store: FileStore = new PgFileStore(deps.sql, deps.readSql),
  ) {
    this.maxBytes = deps.config.FILE_MAX_BYTES;
    this.slots = new Slots(deps.config.FILE_PROCESS_CONCURRENCY);
    this.rates = new RateLimiter(deps.redis, deps.config.FILE_UPLOADS_PER_MINUTE, 60_000, { now: () => deps.clock.now().getTime() });
    this.prefix = `${deps.config.REDIS_KEY_PREFIX}files:rate:`;
  }

  /** The reply to an upload whose body was larger than FILE_MAX_BYTES (sent before reading it). */
  tooLarge(): HttpReply {
    return errorReply(new FileError('too_large', `This image is larger than ${megabytes(this.maxBytes)}`));
  }

  async upload(req: UploadRequest): Promise<HttpReply> {
    try {
      const link = await this.participant(req.lessonId, req.headers);
      // images switched off on this node (a rolling deploy): the page tries again, reaching another node or this one later
      if (!this.deps.config.FILE_IMAGES) throw new FileError('unavailable', 'Images cannot be added on this server at the moment: try again in a few minutes', IMAGES_OFF_RETRY_S);
      if (req.body.length > this.maxBytes) return this.tooLarge();
      if (req.body.length === 0) throw new FileError('invalid_image', 'The upload was empty');
      const rate = await this.rates.take(this.prefix + req.lessonId + ':' + personIdOf(link));
      if (!rate.allowed) {
        throw new FileError('rate_limited', `At most ${this.deps.config.FILE_UPLOADS_PER_MINUTE} images a minute: try again in a moment`, Math.ceil(rate.retryAfterMs / 1000));
      }
      const checked = await this.slots.run(() => checkImage(req.body, { maxPixels: this.deps.config.FILE_MAX_PIXELS }, req.headers['content-type']), PROCESS_QUEUE_MS);
      const { info, created } = await this.store.put(req.lessonId, checked, personIdOf(link), {
        maxBytes: this.deps.config.FILE_LESSON_MAX_BYTES,
        maxFiles: this.deps.config.FILE_LESSON_MAX_FILES,
      });
      return { status: created ? 201 : 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' }, body: JSON.stringify(info) };
    } catch (err) {
      return this.failed(err, 'upload');
    }
  }

  async serve(req: FileRequest, head: boolean): Promise<HttpReply> {
    try {
      await this.reader(req.lessonId, req.headers);
      if (!FILE_ID.test(req.fileId)) throw new FileError('not_found', 'No such file in this lesson');
      const etag = `"${req.fileId}"`;
      const headers = {
        etag,
        'cache-control': 'private, max-age=31536000, immutable',
        'x-content-type-options': 'nosniff',
        'content-security-policy': PAGE_CSP,
        'cross-origin-resource-policy': 'same-origin',
        vary: 'authorization',
      };
      const match = req.headers['if-none-match'];
      if (head || match) {
        const info = await this.store.info(req.lessonId, req.fileId);
        if (!info) throw new FileError('not_found', 'No such file in this lesson');
        if (match && match.split(',').some((t) => t.trim() === etag || t.trim() === '*')) return { status: 304, headers, body: '' };
        if (head) return { status: 200, headers: { ...headers, 'content-type': info.type }, body: Buffer.alloc(info.size) };
      }
      const key = `${req.lessonId}/${req.fileId}`;
      const file = this.cache.get(key) ?? (await this.store.get(req.lessonId, req.fileId));
      if (!file) throw new FileError('not_found', 'No such file in this lesson');
      this.cache.set(key, file);
      return { status: 200, headers: { ...headers, 'content-type': file.type }, body: file.data };
    } catch (err) {
      return this.failed(err, 'serve');
    }
  }

  private participant(lessonId: string, headers: Record<string, string>): Promise<ResolvedLink> {
    return participantOf(this.checkLink, lessonId, headers);
  }

  /** Who may read a file: a participant of the lesson, or a replay link of it (which uploads nothing). */
  private async reader(lessonId: string, headers: Record<string, string>): Promise<void> {
    try {
      await this.participant(lessonId, headers);
    } catch (err) {
      if (!(err instanceof FileError) || err.code !== 'unauthorized') throw err;
      const replay = await checkReplayToken(this.deps, bearer(headers[TOKEN_HEADER]) ?? '');
      if (!('link' in replay)) throw err;
      if (replay.link.lesson_id !== lessonId) throw new FileError('forbidden', 'This link is for another lesson');
    }
  }

  private failed(err: unknown, what: string): HttpReply {
    if (err instanceof FileError) return errorReply(err);
    this.deps.log.warn({ component: 'files', err: (err as Error).message }, `file ${what} failed`);
    return errorReply(new FileError('unavailable', 'The file could not be stored: try again in a moment', 2));
  }
}
