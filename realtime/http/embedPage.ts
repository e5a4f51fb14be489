import { randomBytes } from 'node:crypto';
import type { ResolvedLink } from '../../src/domain/links.js';
import type { HttpReply } from '../features/api.js';

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * Headers of every participant page: the token is in the URL, so no referrer
 * leaves the page, nothing is cached, and only our own socket may be opened.
 */
export function pageHeaders(nonce?: string): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    'content-security-policy': `default-src 'none'; connect-src 'self'; style-src 'unsafe-inline'${nonce ? `; script-src 'nonce-${nonce}'` : ''}; frame-ancestors *`,
  };
}

/** The page for a refused link (401 unknown/expired, 410 deleted lesson). */
export function refusalPage(status: 401 | 410): HttpReply {
  const text = status === 410 ? 'This lesson was deleted.' : 'This link is unknown or has expired. Ask for a new link.';
  return {
    status,
    headers: pageHeaders(),
    body: `<!doctype html><html lang="en"><meta charset="utf-8"><title>Lesson</title><body><p>${text}</p></body></html>`,
  };
}

/** The page for a path the gateway does not serve. */
export function notFoundPage(): HttpReply {
  return {
    status: 404,
    headers: pageHeaders(),
    body: '<!doctype html><html lang="en"><meta charset="utf-8"><title>Lesson</title><body><p>There is no page here. Open the lesson with the link you were given.</p></body></html>',
  };
}

/**
 * Placeholder participant page until the board phase replaces it (through
 * GatewayFeature.embedPage): connects to /ws with the token from its own URL
 * and lists who is present.
 */
export function placeholderPage(link: ResolvedLink): HttpReply {
  const nonce = randomBytes(16).toString('base64');
  const script = `
const token = location.pathname.split('/').pop();
const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
const people = new Map();
const out = document.getElementById('people');
const show = () => { out.textContent = [...people.values()].map(p => p.name + ' (' + p.role + ')').join(', ') || '-'; };
function connect() {
  const ws = new WebSocket(proto + '//' + location.host + '/ws?token=' + encodeURIComponent(token));
  ws.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.type === 'welcome') { people.clear(); m.people.forEach(p => people.set(p.id, p)); }
    if (m.type === 'presence' && m.event === 'joined') people.set(m.person.id, m.person);
    if (m.type === 'presence' && m.event === 'left') people.delete(m.person.id);
    if (m.type === 'presence' && m.event === 'sync') { people.clear(); m.people.forEach(p => people.set(p.id, p)); }
    show();
  };
  ws.onclose = (e) => {
    document.getElementById('state').textContent = 'disconnected (' + e.code + ')';
    if (e.code < 4400 || e.code >= 4500) setTimeout(connect, 2000);
  };
  ws.onopen = () => { document.getElementById('state').textContent = 'connected'; };
}
connect();`;
  return {
    status: 200,
    headers: pageHeaders(nonce),
    body: `<!doctype html><html lang="en"><meta charset="utf-8"><title>${esc(link.lesson_title)}</title>
<body><h1>${esc(link.lesson_title)}</h1><p>You: ${esc(link.name)} (${esc(link.role)})</p>
<p>State: <span id="state">connecting</span></p><p>Present: <span id="people">-</span></p>
<script nonce="${nonce}">${script}</script></body></html>`,
  };
}
