import { describe, expect, it } from 'vitest';
import { writeSplitting } from '../../src/db/errors.js';
import { makeDeps } from '../helpers/deps.js';

const deps = makeDeps();
const sql = deps.sql;

/**
 * A batched write that one item cannot fail for the others (src/db/errors.ts), against Postgres:
 * a table whose CHECK refuses some rows stands for any write that fails because of its data.
 */
describe('writeSplitting', () => {
  it('writes every item but the ones Postgres refuses for good, each of those reported alone, in few writes', async () => {
    const table = `split_${Math.random().toString(36).slice(2, 8)}`;
    await sql.unsafe(`CREATE TABLE ${table} (n int PRIMARY KEY CHECK (n % 17 <> 5))`);
    const items = Array.from({ length: 64 }, (_, i) => i);
    let writes = 0;
    const failed: { items: number[]; code: string }[] = [];
    await writeSplitting(
      items,
      async (group) => {
        writes++;
        await sql.unsafe(`INSERT INTO ${table} SELECT unnest($1::int[])`, [group]);
      },
      (group, err) => void failed.push({ items: group, code: (err as { code: string }).code }),
    );
    const rows = await sql.unsafe<{ n: number }[]>(`SELECT n FROM ${table} ORDER BY n`);
    expect(rows.map((r) => r.n)).toEqual(items.filter((n) => n % 17 !== 5));
    expect(failed).toEqual([5, 22, 39, 56].map((n) => ({ items: [n], code: '23514' })));
    // one by one would take 65; halving finds the four in 39
    expect(writes).toBeLessThan(items.length);
    await sql.unsafe(`DROP TABLE ${table}`);
    await deps.close();
  });

  it('does not split a failure that is not caused by the items: the whole group is reported once', async () => {
    const failed: number[][] = [];
    let writes = 0;
    await writeSplitting(
      [1, 2, 3, 4],
      async () => {
        writes++;
        throw Object.assign(new Error('connection closed'), { code: 'CONNECTION_CLOSED' });
      },
      (group) => void failed.push(group),
    );
    expect(writes).toBe(1);
    expect(failed).toEqual([[1, 2, 3, 4]]);
  });
});
