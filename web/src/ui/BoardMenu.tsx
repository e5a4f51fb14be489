import { MainMenu } from '@excalidraw/excalidraw';
import { PdfIcon, TrashIcon } from './icons.js';

/**
 * Excalidraw's main menu with only what a lesson needs. Rendering our own
 * MainMenu replaces the default one, whose GitHub, X and Discord links lead
 * out of the partner's page (and out of the lesson). Everything here works
 * offline: saving a picture is done in the browser.
 *
 * Excalidraw's own "Reset the canvas" asks whether to "clear the whole canvas": with pages, a teacher
 * cannot tell whether that means every page. Ours says what it does ("Clear this page", naming the
 * page) and is a teacher's only (`clearPage` is given to teachers).
 *
 * "Download notes (PDF)" is everyone's: the whole board, every page, as the partner gets it (ui/notes.ts).
 */
export function BoardMenu(props: { clearPage?: () => void; downloadNotes?: () => void }) {
  return (
    <MainMenu>
      {props.downloadNotes && (
        <MainMenu.Item onSelect={props.downloadNotes} icon={<PdfIcon />} data-testid="download-notes">
          Download notes (PDF)
        </MainMenu.Item>
      )}
      <MainMenu.DefaultItems.SaveAsImage />
      <MainMenu.DefaultItems.SearchMenu />
      <MainMenu.DefaultItems.Help />
      {props.clearPage && (
        <MainMenu.Item onSelect={props.clearPage} icon={<TrashIcon />} data-testid="clear-page">
          Clear this page
        </MainMenu.Item>
      )}
      <MainMenu.Separator />
      <MainMenu.DefaultItems.ToggleTheme />
      <MainMenu.DefaultItems.ChangeCanvasBackground />
    </MainMenu>
  );
}
