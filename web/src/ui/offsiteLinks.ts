/**
 * The page is embedded in a partner's product and its URL carries the
 * participant's entry token: no link may lead off our origin (the token would
 * go along in the referrer or, for Excalidraw's "browse libraries" link, in
 * the URL itself). Our own UI has no such links; Excalidraw renders a few
 * deep inside its dialogs (Help: docs, blog, GitHub; Library: browse and
 * publish; error dialogs: GitHub, Discord). Rather than chase each one, any
 * link to another origin is turned into plain text the moment it is added to
 * the page. The menu (ui/BoardMenu.tsx) and styles.css hide the entries that
 * would then be empty.
 */
export function keepLinksOnThePage(root: Node = document.body): MutationObserver {
  const strip = (node: Node) => {
    if (!(node instanceof Element)) return;
    const links = node.matches('a[href], area[href]') ? [node] : [...node.querySelectorAll('a[href], area[href]')];
    for (const a of links) if (offsite(a.getAttribute('href')!)) neutralise(a);
  };
  const observer = new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === 'attributes') strip(r.target);
      else r.addedNodes.forEach(strip);
    }
  });
  observer.observe(root, { childList: true, subtree: true, attributes: true, attributeFilter: ['href'] });
  strip(root);
  return observer;
}

/** Another origin, or a scheme that is not a page of ours (mailto:, javascript:). */
export function offsite(href: string): boolean {
  if (href.startsWith('#')) return false;
  try {
    const u = new URL(href, location.href);
    return u.origin !== location.origin || (u.protocol !== 'http:' && u.protocol !== 'https:');
  } catch {
    return true;
  }
}

function neutralise(a: Element): void {
  a.removeAttribute('href');
  a.removeAttribute('target');
  a.setAttribute('data-offsite-link-removed', '');
}
