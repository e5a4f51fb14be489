import { CaptureUpdateAction, newElementWith, restoreElements, viewportCoordsToSceneCoords } from '@excalidraw/excalidraw';
import type { ExcalidrawImperativeAPI } from '@excalidraw/excalidraw/types';
import type { BoardElement } from '../../../src/board/schema.js';
import { toExcalidraw, type ExEl } from './convert.js';
import { dataURL, FileTransfer, IMAGE_TYPES, NOT_AN_IMAGE, PendingUploads, prepareImage, Refused, sha256Hex, type LoadedFile } from './images.js';

type Api = ExcalidrawImperativeAPI;
/** the share of the view a new image may take at most, on each side */
const VIEW_SHARE = 0.6;

const randomId = () => Array.from(crypto.getRandomValues(new Uint8Array(15)), (b) => 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-'[b & 63]).join('');
const randomNonce = () => crypto.getRandomValues(new Int32Array(1))[0];

/** Our image element, ready for the editor (restored: every field it needs). */
export function imageElement(el: Omit<Extract<BoardElement, { type: 'image' }>, 'style' | 'angle' | 'locked' | 'version' | 'version_nonce'> & { locked?: boolean }): ExEl {
  const full: BoardElement = {
    angle: 0,
    style: { stroke: 'transparent', fill: 'transparent', stroke_width: 1, stroke_style: 'solid', fill_style: 'solid', opacity: 100 },
    version: 1,
    version_nonce: randomNonce(),
    ...el,
    locked: el.locked ?? false,
  };
  const skeleton = { ...toExcalidraw(full, 0), index: null };
  return restoreElements([skeleton] as never, null, { refreshDimensions: false, repairBindings: false })[0] as unknown as ExEl;
}

/**
 * Images on the board for one person: inserting (picker, paste, drop), the
 * upload of each (placeholder for everyone meanwhile, saved once the server
 * has the file), and the files of the images shown (fetched once each).
 */
export class BoardImages {
  readonly transfer: FileTransfer;
  /** my images uploaded while their element was not in the scene (another page shown): patched when it is */
  private saved = new Map<string, string>();
  /** my images the server refused: deleted when their element is in the scene */
  private refused = new Set<string>();
  /** my uploads on their way, kept across a reload until their element is saved */
  private readonly pending: PendingUploads;
  private resumed = false;

  constructor(
    lessonId: string,
    token: string,
    private readonly api: () => Api | null,
    private readonly notify: (text: string) => void,
  ) {
    this.transfer = new FileTransfer(lessonId, token, (files) => this.addFiles(files));
    this.pending = new PendingUploads(lessonId);
  }

  private addFiles(files: LoadedFile[]): void {
    this.api()?.addFiles(files.map((f) => ({ ...f, created: Date.now() })) as never);
  }

  /** Files of the pictures a page can show: images, PDFs (handled by `pdf`), anything else refused with a sentence. */
  async insert(files: readonly File[], at?: { clientX: number; clientY: number }, pdf?: (f: File) => void): Promise<void> {
    for (const file of files) {
      if (file.type === 'application/pdf' || /\.pdf$/i.test(file.name)) {
        if (pdf) pdf(file);
        else this.notify(NOT_AN_IMAGE);
      } else if (IMAGE_TYPES.includes(file.type)) await this.insertOne(file, at).catch(() => this.notify(`"${file.name}" could not be read as an image.`));
      else this.notify(NOT_AN_IMAGE);
    }
  }

  private async insertOne(file: File, at?: { clientX: number; clientY: number }): Promise<void> {
    const api = this.api();
    if (!api) return;
    const prepared = await prepareImage(file);
    // the author's own id until the server names the file (docs/snapshot-format.md, "Images")
    const localId = await sha256Hex(prepared.blob);
    const url = await dataURL(prepared.blob);
    this.addFiles([{ id: localId, dataURL: url, mimeType: prepared.type }]);
    this.transfer.have(localId);
    const st = api.getAppState();
    const zoom = st.zoom.value;
    const fit = Math.min(1, (st.width * VIEW_SHARE) / zoom / prepared.width, (st.height * VIEW_SHARE) / zoom / prepared.height);
    const width = Math.round(prepared.width * fit);
    const height = Math.round(prepared.height * fit);
    const c = at ? viewportCoordsToSceneCoords(at, st) : { x: -st.scrollX + st.width / 2 / zoom, y: -st.scrollY + st.height / 2 / zoom };
    const el = imageElement({ id: randomId(), page_id: '', z: 'a0', x: Math.round(c.x - width / 2), y: Math.round(c.y - height / 2), type: 'image', width, height, file_id: localId, status: 'pending', scale: [1, 1], crop: null });
    // kept before the element is shown to anyone: a reload from now on takes the upload up again
    await this.pending.put({ elementId: el.id, localId, blob: prepared.blob, at: Date.now() });
    api.updateScene({ elements: [...api.getSceneElementsIncludingDeleted(), el] as never, captureUpdate: CaptureUpdateAction.IMMEDIATELY });
    await this.finish(el.id, prepared.blob, url);
  }

  /** Uploads the file an element of mine waits for; the element is saved (or deleted, refused) by `sweep`. */
  private async finish(elementId: string, blob: Blob, url: string): Promise<void> {
    try {
      const info = await this.transfer.upload(blob);
      this.addFiles([{ id: info.id, dataURL: url, mimeType: info.type }]);
      this.transfer.have(info.id);
      this.saved.set(elementId, info.id);
    } catch (err) {
      this.notify(err instanceof Refused ? err.message : 'The image could not be added.');
      this.refused.add(elementId);
      void this.pending.remove(elementId);
    }
    this.sweep();
  }

  /**
   * Once the board is first shown: my uploads that a reload (or a closed tab) interrupted go again,
   * the author's picture shown meanwhile. The element waiting for each is the one the board has
   * (sent before the reload, or kept with my unacknowledged changes): it fills once. Content
   * addressing makes an upload that had in fact arrived cost nothing (the same file).
   */
  async resume(): Promise<void> {
    if (this.resumed) return;
    this.resumed = true;
    for (const p of await this.pending.all()) {
      const url = await dataURL(p.blob);
      this.addFiles([{ id: p.localId, dataURL: url, mimeType: p.blob.type }]);
      this.transfer.have(p.localId);
      void this.finish(p.elementId, p.blob, url);
    }
  }

  /**
   * After every change of the scene: my uploads that finished are saved in their element, refused
   * ones deleted, and the files of the images shown that this page does not have are fetched.
   */
  sweep(): void {
    const api = this.api();
    if (!api) return;
    const files = api.getFiles();
    const want: string[] = [];
    let patched = false;
    const elements = api.getSceneElementsIncludingDeleted().map((e) => {
      const ex = e as unknown as ExEl;
      if (ex.type === 'image' && ex.isDeleted && this.saved.delete(ex.id)) void this.pending.remove(ex.id);
      if (ex.type !== 'image' || ex.isDeleted) return e;
      const fileId = this.saved.get(ex.id);
      if (fileId) {
        // the saved element goes with my changes (kept across a reload from here): the upload is done
        this.saved.delete(ex.id);
        void this.pending.remove(ex.id);
        if (ex.status === 'pending') {
          patched = true;
          return newElementWith(e as never, { fileId, status: 'saved' } as never);
        }
      }
      if (this.refused.delete(ex.id)) {
        patched = true;
        return newElementWith(e as never, { isDeleted: true } as never);
      }
      if (ex.status !== 'pending' && typeof ex.fileId === 'string' && !files[ex.fileId]) want.push(ex.fileId);
      return e;
    });
    if (patched) api.updateScene({ elements: elements as never, captureUpdate: CaptureUpdateAction.NEVER });
    if (want.length) this.transfer.want(want);
  }
}
