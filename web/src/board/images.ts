/**
 * The board's files on the page (docs/board.md, "Images and PDFs"), in the
 * model of Excalidraw's collaboration app (FileManager): an image element
 * names its file by id, and a file is fetched or uploaded once by id, apart
 * from the element, so a missing file shows the editor's placeholder and
 * never holds the board up.
 *
 * - Before upload an image is scaled to at most MAX_SIDE pixels on its long
 *   side and re-encoded when it is large (a 12 MB phone photo leaves as a JPEG
 *   well under 1 MB); a GIF leaves as a PNG of its first frame.
 * - Uploads go to the gateway with the link token in a header; one that fails
 *   for the network waits for the connection to come back (or a few seconds)
 *   and goes again; one the server refuses is given up with its sentence.
 * - Files of image elements the page shows are fetched once each; the
 *   browser keeps them (the gateway marks them immutable).
 */

/** What the board takes (the server checks again: docs/protocol.md, "Files"). */
export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/webp', 'image/gif'];
export const MAX_SIDE = 2560;
/** an image already within MAX_SIDE and at most this large (a screenshot) goes as it is, losslessly */
const KEEP_BYTES = 1024 * 1024;
const JPEG_QUALITY = 0.85;
export const NOT_AN_IMAGE = 'Only PNG, JPEG, WebP and GIF images and PDF files can be added to the board.';

export interface Prepared {
  blob: Blob;
  type: string;
  width: number;
  height: number;
}

export interface FileInfo {
  id: string;
  type: string;
  size: number;
  width: number;
  height: number;
}

/** A canvas's picture as a blob of `type` (a browser that cannot write it gives PNG). */
export function canvasBlob(canvas: HTMLCanvasElement, type: string, quality?: number): Promise<Blob> {
  return new Promise((resolve, reject) => canvas.toBlob((b) => (b ? resolve(b) : reject(new Error('the image could not be encoded'))), type, quality));
}

/** Scales an image file down to MAX_SIDE and re-encodes it when it is large; small ones go as they are. */
export async function prepareImage(file: Blob): Promise<Prepared> {
  // the first frame of an animation; EXIF orientation applied as the browser shows it
  const bmp = await createImageBitmap(file, { imageOrientation: 'from-image' });
  try {
    const scale = Math.min(1, MAX_SIDE / Math.max(bmp.width, bmp.height));
    const width = Math.max(1, Math.round(bmp.width * scale));
    const height = Math.max(1, Math.round(bmp.height * scale));
    if (scale === 1 && file.size <= KEEP_BYTES && file.type !== 'image/gif') return { blob: file, type: file.type, width, height };
    const canvas = document.createElement('canvas');
    canvas.width = width;
    canvas.height = height;
    const ctx = canvas.getContext('2d')!;
    // a photo becomes a JPEG (on white: the board is white); a drawing or a GIF frame stays lossless
    const photo = file.type === 'image/jpeg' || file.type === 'image/webp' || file.size > KEEP_BYTES * 2;
    if (photo) {
      ctx.fillStyle = '#ffffff';
      ctx.fillRect(0, 0, width, height);
    }
    ctx.imageSmoothingQuality = 'high';
    ctx.drawImage(bmp, 0, 0, width, height);
    const blob = await canvasBlob(canvas, photo ? 'image/jpeg' : 'image/png', photo ? JPEG_QUALITY : undefined);
    return { blob, type: blob.type, width, height };
  } finally {
    bmp.close();
  }
}

export async function sha256Hex(blob: Blob): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', await blob.arrayBuffer());
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

export function dataURL(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result));
    r.onerror = () => reject(r.error);
    r.readAsDataURL(blob);
  });
}

/** A refusal by the server: its sentence is for the person. */
export class Refused extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const RETRY_MS = [1000, 2000, 5000, 10_000, 30_000];
const FETCHES_AT_ONCE = 4;

export interface LoadedFile {
  id: string;
  dataURL: string;
  mimeType: string;
}

/**
 * Uploads and fetches of one lesson's files with one participant's link.
 * `online()` is called when the connection (the board's socket) is back: what
 * waits for the network goes at once.
 */
export class FileTransfer {
  private wake: (() => void)[] = [];
  private requested = new Set<string>();
  private queue: string[] = [];
  private running = 0;
  /** fetches that failed for the network, tried again when the connection is back */
  private failed = new Set<string>();

  constructor(
    private readonly lessonId: string,
    private readonly token: string,
    private readonly loaded: (files: LoadedFile[]) => void,
  ) {}

  online(): void {
    const w = this.wake;
    this.wake = [];
    for (const f of w) f();
    for (const id of this.failed) this.requested.delete(id);
    this.failed.clear();
  }

  private waitOnline(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(go, ms);
      function go() {
        clearTimeout(t);
        resolve();
      }
      this.wake.push(go);
    });
  }

  private headers(): Record<string, string> {
    return { authorization: `Bearer ${this.token}` };
  }

  /** Uploads until the server answers: its file, or Refused with its sentence. `cancelled` stops the retries. */
  async upload(blob: Blob, cancelled: () => boolean = () => false): Promise<FileInfo> {
    for (let attempt = 0; ; attempt++) {
      if (cancelled()) throw new Refused('cancelled', 'Cancelled.');
      let res: Response | null = null;
      try {
        res = await fetch(`/files/${encodeURIComponent(this.lessonId)}`, { method: 'POST', headers: { ...this.headers(), 'content-type': blob.type }, body: blob });
      } catch {
        res = null; // the network: try again
      }
      if (res && res.status < 500 && res.status !== 429) {
        const body = (await res.json().catch(() => null)) as (FileInfo & { detail?: { code: string; message: string } }) | null;
        if (res.ok && body) return body;
        // a 404 without our answer is a node of a release before files (a rolling deploy): another goes on
        if (body?.detail || res.status !== 404) throw new Refused(body?.detail?.code ?? 'refused', body?.detail?.message ?? `The image was refused (${res.status}).`);
      }
      const after = Number(res?.headers.get('retry-after')) * 1000;
      await this.waitOnline(after > 0 ? after : RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)]);
    }
  }

  /** Fetches each of these files once (a few at a time); each arrives through `loaded`. */
  want(ids: Iterable<string>): void {
    for (const id of ids) {
      if (this.requested.has(id)) continue;
      this.requested.add(id);
      this.queue.push(id);
    }
    this.pump();
  }

  /** A file this page has already (its own upload): never fetched. */
  have(id: string): void {
    this.requested.add(id);
  }

  private pump(): void {
    while (this.running < FETCHES_AT_ONCE && this.queue.length) {
      const id = this.queue.shift()!;
      this.running++;
      this.fetchOne(id).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  private async fetchOne(id: string): Promise<void> {
    try {
      const res = await fetch(`/files/${encodeURIComponent(this.lessonId)}/${id}`, { headers: this.headers() });
      if (!res.ok) {
        // not there (yet, or ever): the placeholder stays; a server error is tried again on reconnect
        if (res.status >= 500) this.failed.add(id);
        return;
      }
      const blob = await res.blob();
      this.loaded([{ id, dataURL: await dataURL(blob), mimeType: blob.type }]);
    } catch {
      this.failed.add(id);
    }
  }
}

/** An upload of mine on its way, with the element that waits for it. */
export interface PendingUpload {
  elementId: string;
  /** the author's own id of the file (the element's `file_id` while pending) */
  localId: string;
  blob: Blob;
  at: number;
}

/** what a reload does not take up again: an upload left for longer is given up */
const PENDING_MAX_AGE_MS = 24 * 3600_000;

/**
 * My uploads on their way, kept in the browser (IndexedDB, per lesson) until their element is saved:
 * a reload or a tab closed mid-upload takes them up again, and the element that waits for the file
 * fills once, as if nothing happened. A browser that refuses the storage (private mode, an embedding
 * page's settings) keeps nothing: the upload then goes only while the tab stays open.
 */
export class PendingUploads {
  private opened: Promise<IDBDatabase | null> | null = null;

  constructor(private readonly lessonId: string) {}

  private db(): Promise<IDBDatabase | null> {
    this.opened ??= new Promise((resolve) => {
      try {
        const req = indexedDB.open('board-uploads', 1);
        req.onupgradeneeded = () => req.result.createObjectStore('pending');
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => resolve(null);
        req.onblocked = () => resolve(null);
      } catch {
        resolve(null);
      }
    });
    return this.opened;
  }

  private async run<T>(mode: IDBTransactionMode, fn: (s: IDBObjectStore) => IDBRequest<T>): Promise<T | undefined> {
    const db = await this.db();
    if (!db) return undefined;
    return new Promise((resolve) => {
      try {
        const req = fn(db.transaction('pending', mode).objectStore('pending'));
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => resolve(undefined);
      } catch {
        resolve(undefined);
      }
    });
  }

  private key(elementId: string): string {
    return `${this.lessonId}/${elementId}`;
  }

  async put(p: PendingUpload): Promise<void> {
    await this.run('readwrite', (s) => s.put(p, this.key(p.elementId)));
  }

  async remove(elementId: string): Promise<void> {
    await this.run('readwrite', (s) => s.delete(this.key(elementId)));
  }

  /** This lesson's uploads left on their way, oldest first (those too old are given up and removed). */
  async all(now = Date.now()): Promise<PendingUpload[]> {
    const range = IDBKeyRange.bound(`${this.lessonId}/`, `${this.lessonId}/\uffff`);
    const list = ((await this.run('readonly', (s) => s.getAll(range))) ?? []) as PendingUpload[];
    const old = list.filter((p) => now - p.at > PENDING_MAX_AGE_MS);
    for (const p of old) await this.remove(p.elementId);
    return list.filter((p) => now - p.at <= PENDING_MAX_AGE_MS && p.blob instanceof Blob).sort((a, b) => a.at - b.at);
  }
}
