import { MainMenu } from '@excalidraw/excalidraw';

/**
 * Excalidraw's main menu with only what a lesson needs. Rendering our own
 * MainMenu replaces the default one, whose GitHub, X and Discord links lead
 * out of the partner's page (and out of the lesson). Everything here works
 * offline: saving a picture is done in the browser.
 */
export function BoardMenu() {
  return (
    <MainMenu>
      <MainMenu.DefaultItems.SaveAsImage />
      <MainMenu.DefaultItems.SearchMenu />
      <MainMenu.DefaultItems.Help />
      <MainMenu.DefaultItems.ClearCanvas />
      <MainMenu.Separator />
      <MainMenu.DefaultItems.ToggleTheme />
      <MainMenu.DefaultItems.ChangeCanvasBackground />
    </MainMenu>
  );
}
