import { createSql } from '../../src/db/index.js';
import { getUsageReport } from '../../src/reports/usage.js';
import { renderUsage } from '../../src/api/presenters/usage.js';
const sql = createSql('postgres://postgres@127.0.0.1:5432/lessons_bench_reports', { max: 2 });
const P = 'ptr_bench_1';
for (let i = 0; i < 8; i++) {
  const t0 = performance.now();
  const r = await getUsageReport(sql, P, { from: '2025-11-23', to: '2026-11-22' }, new Date());
  let n = 0; let days = 0;
  const t1 = performance.now();
  for await (const d of r.days) { days++; n += d.items.length; }
  const t2 = performance.now();
  const r2 = await getUsageReport(sql, P, { from: '2025-11-23', to: '2026-11-22' }, new Date());
  let bytes = 0;
  const t3 = performance.now();
  for await (const chunk of renderUsage(r2)) bytes += chunk.length;
  const t4 = performance.now();
  console.log(`fetch+decode ${(t2 - t1).toFixed(0)} ms (${days} days, ${n} items), fetch+decode+render ${(t4 - t3).toFixed(0)} ms ${bytes}`);
}
await sql.end();
