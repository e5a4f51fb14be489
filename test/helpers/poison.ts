import type { Sql } from '../../src/db/index.js';

/**
 * Postgres refuses, for good, every row of one lesson written to `table` (a trigger raising SQLSTATE
 * 22003, numeric value out of range, as a version past the column's range would). For a database of
 * the test file's own: it would refuse other files' rows too.
 */
export async function poisonLesson(sql: Sql, table: string, lessonId: string): Promise<void> {
  await sql`CREATE TABLE IF NOT EXISTS test_poisoned (lesson_id text PRIMARY KEY)`;
  await sql.unsafe(`
    CREATE OR REPLACE FUNCTION test_poison() RETURNS trigger AS $$
    BEGIN
      IF NEW.lesson_id IN (SELECT lesson_id FROM test_poisoned) THEN
        RAISE EXCEPTION 'integer out of range' USING ERRCODE = '22003';
      END IF;
      RETURN NEW;
    END $$ LANGUAGE plpgsql`);
  await sql`INSERT INTO test_poisoned VALUES (${lessonId}) ON CONFLICT DO NOTHING`;
  await sql.unsafe(`DROP TRIGGER IF EXISTS test_poison ON ${table}; CREATE TRIGGER test_poison BEFORE INSERT OR UPDATE ON ${table} FOR EACH ROW EXECUTE FUNCTION test_poison()`);
}
