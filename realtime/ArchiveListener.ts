import type { Gateway } from './Gateway.js';

/**
 * DELETE /lessons/{id} commits archived_at, then pg_notify('lesson_archived', id)
 * (src/domain/lessons.ts). Every node listens and closes that lesson's
 * sockets. A notification missed while the LISTEN connection reconnects is
 * caught by the sweeper (Maintenance.sweep), so this is the fast path only.
 */
export async function listenForArchives(gw: Gateway): Promise<() => Promise<void>> {
  const { sql } = gw.deps;
  const handle = await sql.listen('lesson_archived', (lessonId) => {
    gw.archived(lessonId).catch((err) => gw.log.error({ err, lesson_id: lessonId }, 'archive handling failed'));
  });
  return () => handle.unlisten();
}
