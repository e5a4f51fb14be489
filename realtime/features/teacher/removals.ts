import type { Sql } from '../../../src/db/index.js';
import type { ResolvedLink } from '../../../src/domain/links.js';
import { publicPersonId } from '../../Gateway.js';

/**
 * Removals by a teacher, durable in Postgres (migrations/007_board_wiring.sql):
 * a removed person's links to the lesson issued at or before the removal are
 * refused for as long as they would be valid; a link issued later works.
 */
export class Removals {
  constructor(
    private readonly sql: Sql,
    /** the read pool (Deps.readSql): the check runs on every upgrade and page load */
    private readonly reads: Sql,
  ) {}

  /** Records the removal (again: a later removal also refuses links issued in between). */
  async remove(lessonId: string, personId: string, by: string, at: Date): Promise<void> {
    await this.sql`
      INSERT INTO lesson_removals (lesson_id, person_id, removed_at, removed_by)
      VALUES (${lessonId}, ${personId}, ${at}, ${by})
      ON CONFLICT (lesson_id, person_id) DO UPDATE SET removed_at = EXCLUDED.removed_at, removed_by = EXCLUDED.removed_by`;
  }

  /** One primary-key probe per upgrade and page load. */
  async isRemoved(link: ResolvedLink): Promise<boolean> {
    const rows = await this.reads`
      SELECT 1 FROM lesson_removals r JOIN links k ON k.id = ${link.link_id}
      WHERE r.lesson_id = ${link.lesson_id} AND r.person_id = ${publicPersonId(link.lesson_id, link.user_hash)}
        AND k.created_at <= r.removed_at`;
    return rows.length > 0;
  }
}
