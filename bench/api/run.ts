/**
 * bench/api: autocannon against a running partner API (its own process, ROLES=api,
 * a seeded partner in a database of its own), and the same load against a bare
 * Koa "hello" process in the same run.
 *
 *   npm run bench:api [-- --seconds 8 --rounds 3 --connections 50]
 *
 * Prints req/s and p50/p99 latency per round and the medians, the ratio of
 * GET /lessons/{id} throughput to bare Koa's, and the API process's CPU time per
 * request (user + system, from /proc: steadier than req/s on a shared 2-core host).
 * The GETs go round 1,000 lessons of the partner, as a partner's reads would:
 * lookups made together are batched (src/domain/lessons.ts), and reading one
 * lesson over and over would batch better than real traffic. Each lesson has
 * held `--sessions` ended sessions (default 3): a lesson's billed_seconds is
 * the sum of its sessions' seconds, read with it.
 */
import postgres from 'postgres';
import autocannon from 'autocannon';
import { createSql } from '../../src/db/index.js';
import { migrate } from '../../src/db/migrate.js';
import { createApiKey } from '../../src/domain/apiKeys.js';
import { createLesson } from '../../src/domain/lessons.js';
import { topUp } from '../../src/domain/ledger.js';
import { createPartner } from '../../src/domain/partners.js';
import { commandLine } from '../lib/cli.js';
import { cpuSeconds, freePort, median, startProcess } from '../lib/service.js';

const { values } = commandLine('npm run bench:api: the partner API against a bare Koa "hello", autocannon; req/s, p50/p99, CPU per request', {
  seconds: { type: 'string', default: '8', help: 'seconds of load per round' },
  rounds: { type: 'string', default: '3', help: 'rounds per target (medians are printed)' },
  connections: { type: 'string', default: '50', help: 'autocannon connections' },
  sessions: { type: 'string', default: '3', help: 'ended sessions per lesson' },
});
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const connections = Number(values.connections);

const baseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/lessons';
const dbUrl = new URL(baseUrl);
dbUrl.pathname = `/lessons_bench_api_${process.pid}`;
const databaseUrl = dbUrl.toString();
await migrate(databaseUrl);
const sql = createSql(databaseUrl, { max: 2 });
const partner = await createPartner(sql, { name: 'bench' });
const { apiKey } = await createApiKey(sql, partner.id);
await topUp(sql, { partnerId: partner.id, minutes: 1000, at: new Date() });
const lessonIds: string[] = [];
for (let i = 0; i < 1000; i++) lessonIds.push((await createLesson(sql, partner, { title: `bench lesson ${i}` }, new Date())).id);
await sql`
  INSERT INTO sessions (lesson_id, partner_id, mode, rate_percent, started_at, ended_at, seconds, charged_seconds, people_max)
  SELECT l.id, l.partner_id, l.mode, 100, now() - n * interval '1 day', now() - n * interval '1 day' + interval '1 hour', 3600, 3600, 2
  FROM lessons l CROSS JOIN generate_series(1, ${Number(values.sessions)}) n WHERE l.partner_id = ${partner.id}`;
await sql`ANALYZE sessions`;
let nextLesson = 0;

const apiPort = await freePort();
const helloPort = await freePort();
const env = {
  DATABASE_URL: databaseUrl,
  REDIS_KEY_PREFIX: `bench:${process.pid}:`,
  ROLES: 'api',
  API_PORT: String(apiPort),
  LOG_LEVEL: 'warn',
  RATE_LIMIT_PER_MINUTE: '100000000',
};
// the compiled service, as `npm start` runs it (the npm script compiles first)
const api = await startProcess('dist/src/main.js', env, `http://127.0.0.1:${apiPort}/healthz`);
const hello = await startProcess('bench/api/hello-koa.ts', { PORT: String(helloPort) }, `http://127.0.0.1:${helloPort}/`);

interface Figures { rps: number; p50: number; p99: number; errors: number; non2xx: number; cpuUs?: number }
/** `pid`: the process under load, whose CPU per request is measured too */
async function load(opts: autocannon.Options, pid?: number): Promise<Figures> {
  const cpu0 = pid ? cpuSeconds(pid) : 0;
  const r = await autocannon({ connections, duration: seconds, ...opts });
  const cpuUs = pid ? ((cpuSeconds(pid) - cpu0) * 1e6) / r.requests.total : undefined;
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors, non2xx: r.non2xx, cpuUs };
}

const auth = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
const getLessons: autocannon.Options = {
  url: `http://127.0.0.1:${apiPort}/api/partner/v1/lessons/${lessonIds[0]}`,
  headers: auth,
  requests: [{ setupRequest: (req: Record<string, unknown>) => ({ ...req, path: `/api/partner/v1/lessons/${lessonIds[nextLesson++ % lessonIds.length]}` }) }],
};
const results: Record<string, Figures[]> = { 'bare koa GET /': [], 'GET /lessons/{id}': [], 'POST /lessons': [] };
// warm-up
await load({ ...getLessons, duration: 2 });
await load({ url: `http://127.0.0.1:${helloPort}/`, duration: 2 });
for (let i = 0; i < rounds; i++) {
  results['bare koa GET /'].push(await load({ url: `http://127.0.0.1:${helloPort}/` }, hello.pid));
  results['GET /lessons/{id}'].push(await load(getLessons, api.pid));
  results['POST /lessons'].push(
    await load({ url: `http://127.0.0.1:${apiPort}/api/partner/v1/lessons`, method: 'POST', headers: auth, body: JSON.stringify({ title: 'bench' }) }, api.pid),
  );
  for (const [name, list] of Object.entries(results)) {
    const f = list[list.length - 1];
    console.log(
      `round ${i + 1}  ${name.padEnd(20)} ${f.rps.toFixed(0).padStart(7)} req/s  p50 ${f.p50} ms  p99 ${f.p99} ms  ` +
        `CPU ${f.cpuUs!.toFixed(0)} us/req  errors ${f.errors}  non-2xx ${f.non2xx}`,
    );
  }
}

console.log(`\nmedians over ${rounds} rounds of ${seconds} s at ${connections} connections:`);
const med: Record<string, { rps: number; p50: number; p99: number; cpuUs: number }> = {};
for (const [name, list] of Object.entries(results)) {
  const m = (pick: (f: Figures) => number) => median(list.map(pick));
  med[name] = { rps: m((f) => f.rps), p50: m((f) => f.p50), p99: m((f) => f.p99), cpuUs: m((f) => f.cpuUs!) };
  console.log(`${name.padEnd(20)} ${med[name].rps.toFixed(0).padStart(7)} req/s  p50 ${med[name].p50} ms  p99 ${med[name].p99} ms  CPU ${med[name].cpuUs.toFixed(0)} us/req`);
}
const ratio = med['GET /lessons/{id}'].rps / med['bare koa GET /'].rps;
const p99 = med['GET /lessons/{id}'].p99;
// three decimals: with two, 0.246 would print as 0.25 next to its target
console.log(
  `GET /lessons/{id} throughput / bare Koa = ${ratio.toFixed(3)} (target >= 0.25: ${ratio >= 0.25 ? 'met' : 'not met'}); ` +
    `p99 ${p99} ms (target < 25 ms: ${p99 < 25 ? 'met' : 'not met'})`,
);

api.kill('SIGTERM');
hello.kill('SIGTERM');
await sql.end();
const admin = postgres(new URL('/postgres', baseUrl).toString(), { max: 1, onnotice: () => {} });
await new Promise((r) => setTimeout(r, 500));
await admin.unsafe(`DROP DATABASE IF EXISTS "lessons_bench_api_${process.pid}" WITH (FORCE)`);
await admin.end();
process.exit(0);
