import { LESSON_ARCHIVED_CHANNEL } from '../src/db/channels.js';
import { listenSurely } from '../src/db/listen.js';
import type { Gateway } from './Gateway.js';

/**
 * DELETE /lessons/{id} sets archived_at and sends pg_notify('lesson_archived',
 * id) in one statement (archiveLesson, src/domain/lessons.ts), so the
 * notification is delivered if and only if the archive commits. Every node
 * listens, drops the lesson's cached links and closes its sockets. A notification missed while the LISTEN connection reconnects is
 * caught by the sweeper (Maintenance.sweep), so this is the fast path only.
 */
export async function listenForArchives(gw: Gateway): Promise<() => Promise<void>> {
  const { sql } = gw.deps;
  const handle = await listenSurely(
    sql,
    LESSON_ARCHIVED_CHANNEL,
    (lessonId) => {
      gw.archived(lessonId).catch((err) => gw.log.error({ err, lesson_id: lessonId }, 'archive handling failed'));
    },
    undefined,
    gw.log,
  );
  return () => handle.unlisten();
}
