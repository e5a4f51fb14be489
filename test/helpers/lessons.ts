import type { Sql } from '../../src/db/index.js';
import { createLesson, type Lesson, type LessonMode } from '../../src/domain/lessons.js';
import type { Partner } from '../../src/domain/partners.js';

export async function lessonFactory(sql: Sql, partner: Partner, opts: { mode?: LessonMode; external_id?: string; title?: string; at?: Date } = {}): Promise<Lesson> {
  return createLesson(sql, partner, { title: opts.title ?? 'Lesson', mode: opts.mode, external_id: opts.external_id }, opts.at ?? new Date());
}

export async function eventsOf(sql: Sql, partnerId: string, type?: string) {
  return sql<{ id: number; type: string; data: any; created_at: Date }[]>`
    SELECT id, type, data, created_at FROM events WHERE partner_id = ${partnerId} ${type ? sql`AND type = ${type}` : sql``} ORDER BY id`;
}
