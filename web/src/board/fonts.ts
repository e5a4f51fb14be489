/**
 * The fonts a text on the board can be in (convert.ts: `hand`, `sans`, `code`), as Excalidraw names
 * them. Excalidraw fetches a font only when a text first needs it, and measures the text with
 * whatever the browser has at that moment: with the network down then, a text typed in the
 * hand-drawn font was measured in a fallback (222 px instead of 260), stored that narrow, and drawn
 * cut off on every screen for good ("The quick brown fox jun"); the editor never measures a finished
 * text again (its `onLoaded` only redraws). So the page loads these fonts whole, from its own assets
 * (web/build.ts), right after the board is first shown: ~200 KB, all their subsets (Latin, Cyrillic, Greek…).
 * The CJK fallback (Xiaolai, ~13 MB in 200 subsets) stays on demand.
 */
const BOARD_FONTS = new Set(['Excalifont', 'Nunito', 'Comic Shanns']);

/**
 * Loads the board's fonts into memory. Excalidraw adds its FontFaces to `document.fonts` (unloaded)
 * when it loads its scene; this loads those same faces (their URLs under EXCALIDRAW_ASSET_PATH), so
 * the editor's own check (`document.fonts.check`) finds them loaded and its `loadingdone` listener
 * redraws. Until the editor has added them this looks again, for a few seconds.
 */
export function preloadBoardFonts(tries = 50): void {
  const faces: FontFace[] = [];
  document.fonts.forEach((f) => {
    if (BOARD_FONTS.has(f.family.replace(/^["']|["']$/g, ''))) faces.push(f);
  });
  if (!faces.length) {
    if (tries > 1) setTimeout(() => preloadBoardFonts(tries - 1), 100);
    return;
  }
  // a face that fails (the network went meanwhile) stays in the fallback, as before; nothing to report
  for (const f of faces) if (f.status === 'unloaded') f.load().catch(() => undefined);
}
