/** A person's zoom and scroll on one page. */
export interface PageView {
  scrollX: number;
  scrollY: number;
  zoom: number;
}

/**
 * Each page keeps its own view for this tab (docs/board.md, "Pages"): the zoom and scroll a person
 * left a page at are where they find it when they come back, instead of the view of the page they
 * came from. Kept in memory only: a reload starts each page afresh (centred on its drawing).
 */
export class PageViews {
  private readonly views = new Map<string, PageView>();

  /** The view moved while `page` was shown. */
  moved(page: string, v: PageView): void {
    this.views.set(page, { scrollX: v.scrollX, scrollY: v.scrollY, zoom: v.zoom });
  }

  /** The view `page` was left at, if it was shown before. */
  of(page: string): PageView | undefined {
    return this.views.get(page);
  }
}
