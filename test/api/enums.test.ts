import { describe, expect, it } from 'vitest';
import { LESSON_MODES, PLANS, ROLES, SUBJECT_MODES } from '../../src/domain/enums.js';
import { fileDeps } from '../helpers/deps.js';

/**
 * src/domain/enums.ts declares the shared enums once; the SQL CHECK
 * constraints must repeat them (a migration cannot import TypeScript). This
 * fails when the two drift apart, e.g. a value added in TypeScript without the
 * migration that allows it.
 */
describe('shared enums (src/domain/enums.ts)', () => {
  const deps = fileDeps();

  it('are the values the database CHECK constraints allow', async () => {
    const rows = await deps.sql<{ table: string; def: string }[]>`
      SELECT c.conrelid::regclass::text AS table, pg_get_constraintdef(c.oid) AS def
      FROM pg_constraint c WHERE c.contype = 'c' AND c.connamespace = 'public'::regnamespace`;
    const allowed = (table: string, column: string): string[] => {
      const def = rows.find((r) => r.table === table && new RegExp(`\\(\\(?${column}\\b`).test(r.def))?.def;
      expect(def, `${table}.${column} has a CHECK`).toBeDefined();
      return [...def!.matchAll(/'([a-z_]+)'::text/g)].map((m) => m[1]).sort();
    };
    expect(allowed('partners', 'plan')).toEqual([...PLANS].sort());
    expect(allowed('lessons', 'mode')).toEqual([...LESSON_MODES].sort());
    expect(allowed('lessons', 'subject_mode')).toEqual([...SUBJECT_MODES].sort());
    expect(allowed('links', 'role')).toEqual([...ROLES].sort());
    expect(allowed('sessions', 'mode')).toEqual([...LESSON_MODES].sort());
  });
});
