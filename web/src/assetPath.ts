/**
 * Excalidraw loads its fonts at run time from EXCALIDRAW_ASSET_PATH (a CDN by
 * default). The page must work without the internet, so it points at the copy
 * web/build.ts puts beside the bundle. Imported first by main.tsx, before
 * Excalidraw's module runs.
 */
declare global {
  interface Window {
    EXCALIDRAW_ASSET_PATH?: string | string[];
  }
}
const here = new URL('.', import.meta.url);
window.EXCALIDRAW_ASSET_PATH = new URL(`excalidraw/`, here).toString();
export {};
