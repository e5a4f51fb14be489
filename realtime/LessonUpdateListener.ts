import { LESSON_UPDATED_CHANNEL } from '../src/db/channels.js';
import { listenSurely } from '../src/db/listen.js';
import { LESSON_MODES, SUBJECT_MODES, type LessonMode, type SubjectMode } from '../src/domain/enums.js';
import type { ClientConnection } from './ClientConnection.js';
import type { Gateway } from './Gateway.js';

export interface LessonUpdate {
  lesson_id: string;
  title: string;
  mode: LessonMode;
  subject_mode: SubjectMode;
}

function parse(payload: string): LessonUpdate | undefined {
  try {
    const n = JSON.parse(payload) as LessonUpdate;
    if (typeof n?.lesson_id !== 'string' || typeof n.title !== 'string') return undefined;
    if (!LESSON_MODES.includes(n.mode) || !SUBJECT_MODES.includes(n.subject_mode)) return undefined;
    return n;
  } catch {
    return undefined;
  }
}

/**
 * PATCH /lessons/{id} sends `lesson_updated` in its transaction
 * (updateLesson, src/domain/lessons.ts). Every node listens and applies it to
 * its cached links and its sockets of the lesson (applyLessonUpdate). A
 * missed notice (LISTEN reconnecting) leaves the people present with the old
 * title until their next connection: Admission drops its cache on every
 * reconnect, so arrivals read the lesson as it is.
 */
export async function listenForLessonUpdates(gw: Gateway): Promise<() => Promise<void>> {
  const handle = await listenSurely(
    gw.deps.sql,
    LESSON_UPDATED_CHANNEL,
    (payload) => {
      const n = parse(payload);
      if (n) applyLessonUpdate(gw, n);
    },
    undefined,
    gw.log,
  );
  return () => handle.unlisten();
}

/**
 * The partner changed the lesson (PATCH): cached links and this node's sockets carry the new
 * values, and the people here are told (`lesson.updated`: the page shows the new title and
 * toolset at once). A new mode (only ever while no session runs) needs a new welcome (the call
 * starts from it): those sockets are asked to reconnect (1012), as in a drain.
 */
export function applyLessonUpdate(gw: Gateway, u: LessonUpdate): void {
  gw.admission.updateLesson(u);
  const lesson = gw.lesson(u.lesson_id);
  if (!lesson) return;
  const modeChanged: ClientConnection[] = [];
  for (const conn of lesson.conns) {
    if (conn.link.lesson_mode !== u.mode) modeChanged.push(conn);
    Object.assign(conn.link, { lesson_title: u.title, subject_mode: u.subject_mode, lesson_mode: u.mode });
  }
  lesson.deliver(JSON.stringify({ type: 'lesson.updated', lesson: { id: u.lesson_id, title: u.title, mode: u.mode, subject_mode: u.subject_mode } }));
  for (const conn of modeChanged) conn.close('restarting');
}
