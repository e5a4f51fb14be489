import path from 'node:path';
import type { Deps } from '../../../src/deps.js';
import { readAttendance } from '../../../src/domain/attendance.js';
import { readHistory, resolveReplayToken, type ResolvedReplayLink } from '../../../src/domain/replay.js';
import { presentAttendance } from '../../../src/api/presenters/attendance.js';
import { presentHistoryEntry } from '../../../src/api/presenters/history.js';
import type { GatewayFeature, HttpReply } from '../api.js';
import { builtErrorPage, PAGE_CSP, pageHeaders, type ErrorKind } from '../page/feature.js';
import { defaultWebDir, StaticFiles } from '../page/files.js';

/** Operations per answer of the replay page's history reads: a 1-hour lesson's history is a few of them. */
export const REPLAY_PAGE_SIZE = 2000;

const json = (status: number, body: unknown): HttpReply => ({
  status,
  headers: { 'content-type': 'application/json', 'cache-control': 'no-store', 'referrer-policy': 'no-referrer', 'x-content-type-options': 'nosniff' },
  body: JSON.stringify(body),
});

/**
 * The replay page (docs/board.md, "History and replay"): plain HTTP routes of the gateway, apart
 * from everything a lesson's participants use. A replay link is no entry link: admission does not
 * know its token, so it can open no socket, send no board operation, and is never present (it
 * never starts or extends a session and is never billed or in attendance).
 *
 * - GET /replay/<token>: the page (dist/web/replay.html), or the error page of an unknown or
 *   expired link (401) or a deleted lesson (410);
 * - GET /replay/<token>/lesson: the lesson's title and subject, its board's last seq and its attendance (the
 *   timeline's sessions and who was present);
 * - GET /replay/<token>/history?after_seq=N: the next REPLAY_PAGE_SIZE operations of the history.
 * Nothing else: the gateway answers other methods 405, as on every path.
 */
/** The replay link of a token, or why it opens nothing (the replay page's routes, and its images at GET /files). */
export async function checkReplayToken(deps: Deps, token: string): Promise<{ link: ResolvedReplayLink } | { refused: ErrorKind; status: number; message: string }> {
  const link = await resolveReplayToken(deps.readSql, token);
  if (!link) return { refused: 'unknown', status: 401, message: 'This replay link is unknown' };
  if (link.archived) return { refused: 'archived', status: 410, message: 'The lesson was deleted' };
  if (link.expires_at.getTime() <= deps.clock.now().getTime()) return { refused: 'expired', status: 401, message: 'This replay link has expired' };
  return { link };
}

export function replayFeature(deps: Deps, webDir = deps.config.WEB_DIR ?? defaultWebDir()): GatewayFeature {
  const files = new StaticFiles(webDir);
  const check = (token: string) => checkReplayToken(deps, token);
  const refusedJson = (r: { status: number; refused: ErrorKind; message: string }) => json(r.status, { detail: { code: r.refused === 'archived' ? 'archived' : 'unauthorized', message: r.message } });

  return {
    name: 'replay',
    http: [
      {
        method: 'get',
        pattern: '/replay/:token',
        async handle(req) {
          const c = await check(req.params[0] ?? '');
          if (!('link' in c)) return builtErrorPage(files, webDir, c.refused, c);
          const page = await files.read(path.join(webDir, 'replay.html'));
          if (!page) return builtErrorPage(files, webDir, null, { status: 503, message: 'The replay page is not built' });
          return { status: 200, headers: pageHeaders(PAGE_CSP), body: page };
        },
      },
      {
        method: 'get',
        pattern: '/replay/:token/lesson',
        async handle(req) {
          const c = await check(req.params[0] ?? '');
          if (!('link' in c)) return refusedJson(c);
          const now = deps.clock.now();
          const [attendance, [head]] = await Promise.all([
            readAttendance(deps.readSql, c.link.lesson_id, now),
            deps.readSql<{ seq: string }[]>`SELECT seq FROM boards WHERE lesson_id = ${c.link.lesson_id}`,
          ]);
          return json(200, { lesson_id: c.link.lesson_id, title: c.link.lesson_title, subject: c.link.subject_mode, seq: Number(head?.seq ?? 0), now: now.toISOString(), attendance: presentAttendance(c.link.lesson_id, attendance!) });
        },
      },
      {
        method: 'get',
        pattern: '/replay/:token/history',
        async handle(req) {
          const c = await check(req.params[0] ?? '');
          if (!('link' in c)) return refusedJson(c);
          const after = Number(new URLSearchParams(req.query).get('after_seq') ?? 0);
          if (!Number.isSafeInteger(after) || after < 0) return json(400, { detail: { code: 'bad_request', message: 'after_seq: a whole number, 0 or more' } });
          const entries = await readHistory(deps.readSql, c.link.lesson_id, after, REPLAY_PAGE_SIZE);
          return json(200, { entries: entries.map(presentHistoryEntry), more: entries.length === REPLAY_PAGE_SIZE });
        },
      },
    ],
  };
}
