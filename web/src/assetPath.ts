/**
 * Excalidraw loads its fonts at run time from EXCALIDRAW_ASSET_PATH (a CDN by
 * default), and reads it when its module is evaluated. The page must work
 * without the internet, so this points at the copy web/build.ts puts beside
 * the bundle. It is a classic script of its own (boot-<hash>.js, see
 * web/static/index.html): classic scripts run before module scripts, whereas
 * inside the bundle the chunks it imports (Excalidraw's) are evaluated first.
 */
declare global {
  interface Window {
    EXCALIDRAW_ASSET_PATH?: string | string[];
  }
}
const script = document.currentScript as HTMLScriptElement | null;
window.EXCALIDRAW_ASSET_PATH = new URL('excalidraw/', script?.src ?? location.href).toString();
export {};
