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

/**
 * The lesson was deleted (pg_notify, or found by the sweeper): metering
 * stops at archived_at, sockets here close with 4410, the session ends
 * (lesson.ended is sent: the session did end).
 */
export async function archiveLesson(gw: Gateway, lessonId: string): Promise<void> {
  gw.admission.markArchived(lessonId);
  const archivedAt = await gw.ledger.archivedAt(lessonId);
  if (!archivedAt) return;
  const now = gw.now();
  const m = await gw.presence.archiveEnd(lessonId, archivedAt.getTime(), now);
  for (const conn of [...(gw.lesson(lessonId)?.conns ?? [])]) conn.close('archived');
  if (m?.pendingEnd) await gw.meter.finishEnd(lessonId, m, now);
  // a start pending since before the deletion: its session is made by the flush's retry (it
  // ran before the deletion), and ended at archived_at by the next archive check (flush or sweep)
  else if (m?.state === 'starting') gw.meter.retryStart(lessonId, now);
}
