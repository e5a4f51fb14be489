import path from 'node:path';
import type { Deps } from '../../../src/deps.js';
import { resolveLinkToken } from '../../../src/domain/links.js';
import type { Refusal } from '../../admission/Admission.js';
import type { GatewayFeature, HttpReply } from '../api.js';
import { placeholderPage } from '../../http/embedPage.js';
import { defaultWebDir, StaticFiles } from './files.js';

/**
 * Everything the participant page needs, from our own origin (no CDN): the
 * page itself, its scripts, styles and fonts. The token is in the URL, so
 * nothing of the page is cached and no referrer leaves it.
 */
export const PAGE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // Excalidraw and React set inline styles
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "media-src 'self' blob: mediastream:",
  "worker-src 'self' blob:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  // embedded in the partner's page
  'frame-ancestors *',
].join('; ');

const ERROR_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors *";

export const pageHeaders = (csp: string): Record<string, string> => ({
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'content-security-policy': csp,
});

/** Error pages built by web/build.ts (dist/web/errors/<kind>.html) and their status. */
export type ErrorKind = 'unknown' | 'expired' | 'archived' | 'removed' | 'notfound';
const STATUS: Record<ErrorKind, number> = { unknown: 401, expired: 401, archived: 410, removed: 403, notfound: 404 };

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The error page of a refusal, as web/build.ts built it (dist/web/errors/<kind>.html), or from its template. */
export async function builtErrorPage(files: StaticFiles, webDir: string, kind: ErrorKind | null, refusal: Pick<Refusal, 'message'> & { status: number }): Promise<HttpReply> {
  const status = kind ? STATUS[kind] : refusal.status;
  const built = kind ? await files.read(path.join(webDir, 'errors', `${kind}.html`)) : null;
  if (built) return { status, headers: pageHeaders(ERROR_CSP), body: built };
  const template = (await files.read(path.join(webDir, 'error.html')))?.toString('utf8');
  const title = status === 503 ? 'The lesson is temporarily unavailable' : status === 429 ? 'Too many connections' : 'This link does not work';
  const message = `${refusal.message}. Please try again in a moment.`;
  const body = template
    ? template.replaceAll('{{ICON}}', '!').replaceAll('{{TITLE}}', esc(title)).replaceAll('{{MESSAGE}}', esc(message))
    : `<!doctype html><html lang="en"><meta charset="utf-8"><title>Lesson</title><body><h1>${esc(title)}</h1><p>${esc(refusal.message)}</p></body></html>`;
  return { status, headers: pageHeaders(ERROR_CSP), body };
}

/**
 * The participant page from dist/web (docs/board.md, "The participant
 * page"): GET /embed/<token> answers index.html for a valid link and the
 * clear error page of the refusal otherwise (unknown or expired link 401,
 * deleted lesson 410, removed participant 403, anything else with its status);
 * any path nothing serves (`/`, `/embed/`) the 404 card;
 * GET /web/assets/* the bundle. Without a build (dist/web missing) the
 * gateway's placeholder page is served and an error is logged, so a gateway
 * started from a fresh checkout still answers.
 */
export function pageFeature(deps: Deps, webDir = deps.config.WEB_DIR ?? defaultWebDir()): GatewayFeature {
  const files = new StaticFiles(webDir);
  const log = deps.log.child({ component: 'page' });
  let warned = false;
  const notBuilt = () => {
    if (!warned) log.error({ dir: webDir }, 'the participant page is not built (npm run build): serving the placeholder page');
    warned = true;
  };

  const errorPage = (kind: ErrorKind | null, refusal: Pick<Refusal, 'message'> & { status: number }) => builtErrorPage(files, webDir, kind, refusal);

  return {
    name: 'page',
    http: [
      {
        method: 'get',
        pattern: '/web/assets/*',
        handle: (req) => files.asset(req.url, req.headers['accept-encoding'] ?? ''),
      },
    ],
    async embedPage({ link }) {
      const index = await files.read(path.join(webDir, 'index.html'));
      if (!index) {
        notBuilt();
        return placeholderPage(link);
      }
      return { status: 200, headers: pageHeaders(PAGE_CSP), body: index };
    },
    // `/`, `/embed`, `/embed/` and any other path nothing serves: the card, not a dropped connection
    notFoundPage: () => errorPage('notfound', { status: 404, message: 'There is no page here' }),
    async refusalPage({ token, refusal }) {
      if (refusal.code === 'removed') return errorPage('removed', refusal);
      if (refusal.status === 410) return errorPage('archived', refusal);
      if (refusal.status === 401) {
        // The gateway refuses unknown and expired links alike; the page tells the person which.
        const link = await resolveLinkToken(deps.sql, token).catch(() => undefined);
        return errorPage(link ? 'expired' : 'unknown', refusal);
      }
      return errorPage(null, refusal);
    },
  };
}
