import { LESSON_UPDATED_CHANNEL } from '../src/db/channels.js';
import { listenSurely } from '../src/db/listen.js';
import { LESSON_MODES, SUBJECT_MODES, type LessonMode, type SubjectMode } from '../src/domain/enums.js';
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
 * its cached links and its sockets of the lesson (Gateway.lessonUpdated). A
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
      if (n) gw.lessonUpdated(n);
    },
    undefined,
    gw.log,
  );
  return () => handle.unlisten();
}
