/**
 * bench/lessons: the partner API in this process (real Postgres and Redis, a database of its own).
 *
 *   npm run bench:lessons [-- --lessons 100000 --requests 200]
 *
 * 1. GET /lessons/{id}/attendance of a lesson with 30 people over 20 sessions (each person present
 *    in every session: 1,200 intervals from 2,400 presence marks), `--requests` times one after
 *    another; baseline: GET /lessons/{id} of the same lesson, in the same run.
 * 2. GET /lessons of a partner with `--lessons` lessons, page by page (limit 100) to the end:
 *    p50/p99 per page over the first tenth and the last tenth of the pages (a keyset page must
 *    cost the same at any depth); baseline: the same pages with `offset`-style paging would grow,
 *    so the first tenth is the baseline of the last.
 * Prints the figures as JSON lines.
 */
import postgres from 'postgres';
import { loadConfig } from '../../src/config.js';
import { createDeps } from '../../src/deps.js';
import { migrate } from '../../src/db/migrate.js';
import { createApiKey } from '../../src/domain/apiKeys.js';
import { topUp } from '../../src/domain/ledger.js';
import { createPartner } from '../../src/domain/partners.js';
import { hashUserId } from '../../src/domain/links.js';
import { publicPersonId } from '../../src/domain/people.js';
import { startApi } from '../../src/server.js';
import { median, percentile } from '../lib/service.js';
import { commandLine } from '../lib/cli.js';

const { values } = commandLine('npm run bench:lessons: GET /lessons/{id}/attendance of 30 people over 20 sessions, and GET /lessons page by page', {
  lessons: { type: 'string', default: '100000', help: 'lessons of the partner whose list is read page by page' },
  requests: { type: 'string', default: '200', help: 'attendance requests timed' },
});
const LESSONS = Number(values.lessons);
const REQUESTS = Number(values.requests);

const baseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/lessons';
const dbUrl = new URL(baseUrl);
const dbName = `lessons_bench_lessons_${process.pid}`;
dbUrl.pathname = `/${dbName}`;
const databaseUrl = dbUrl.toString();
await migrate(databaseUrl);
const deps = createDeps(loadConfig({ ...process.env, DATABASE_URL: databaseUrl, API_PORT: '0', LOG_LEVEL: 'silent', RATE_LIMIT_PER_MINUTE: '1000000', REDIS_KEY_PREFIX: `bench-lessons-${process.pid}:` }));
const { sql } = deps;
const loadAvg = (await import('node:os')).loadavg()[0].toFixed(1);

const partner = await createPartner(sql, { name: 'bench' });
const { apiKey } = await createApiKey(sql, partner.id);
await topUp(sql, { partnerId: partner.id, minutes: 1000, at: new Date() });
const api = await startApi(deps, 0);
const base = `http://127.0.0.1:${api.port}/api/partner/v1`;
const get = async (path: string): Promise<{ ms: number; body: any; link: string | null }> => {
  const t0 = performance.now();
  const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
  const body = await res.json();
  const ms = performance.now() - t0;
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
  return { ms, body, link: res.headers.get('link') };
};
const round = (x: number) => Math.round(x * 100) / 100;

// ---- attendance: 30 people, 20 sessions ----
const [lesson] = await sql<{ id: string }[]>`
  INSERT INTO lessons (id, partner_id, title, mode, subject_mode, created_at) VALUES ('lsn_bench_attendance', ${partner.id}, 'Attendance', 'full', 'generic', now() - interval '30 days')
  RETURNING id`;
const t0 = Date.now() - 25 * 86_400_000;
const people = Array.from({ length: 30 }, (_, i) => ({ link: `lnk_bench_${i}`, hash: hashUserId(partner, `user-${i}`) }));
await sql`
  INSERT INTO links (id, lesson_id, partner_id, token_hash, user_hash, name, role, expires_at, created_at)
  SELECT l, ${lesson.id}, ${partner.id}, decode(md5(l), 'hex'), h, 'Person ' || n, CASE WHEN n = 1 THEN 'teacher' ELSE 'student' END, now(), ${new Date(t0)}
  FROM unnest(${people.map((p) => p.link)}::text[], ${people.map((p) => p.hash)}::text[]) WITH ORDINALITY AS x(l, h, n)`;
const marks: [string, boolean, string | null, Date][] = [];
for (let s = 0; s < 20; s++) {
  const start = t0 + s * 86_400_000;
  await sql`INSERT INTO sessions (lesson_id, partner_id, mode, rate_percent, started_at, ended_at, seconds, charged_seconds, people_max)
            VALUES (${lesson.id}, ${partner.id}, 'full', 100, ${new Date(start + 60_000)}, ${new Date(start + 3_600_000)}, 3540, 3540, 30)`;
  people.forEach((p, i) => {
    const person = publicPersonId(lesson.id, p.hash);
    marks.push([person, true, p.link, new Date(start + i * 1000)], [person, false, null, new Date(start + 3_600_000 - i * 1000)]);
  });
}
await sql`
  INSERT INTO presence_marks (lesson_id, person_id, joined, link_id, at)
  SELECT ${lesson.id}, p, j::boolean, k, t FROM unnest(${marks.map((m) => m[0])}::text[], ${marks.map((m) => String(m[1]))}::text[],
    ${marks.map((m) => m[2]) as string[]}::text[], ${marks.map((m) => m[3].toISOString())}::timestamptz[]) AS x(p, j, k, t)`;
const check = (await get(`/lessons/${lesson.id}/attendance`)).body;
if (check.sessions.length !== 20 || check.sessions.some((s: any) => s.people.length !== 30)) throw new Error('attendance seed is not 30 x 20');
const att: number[] = [];
const one: number[] = [];
for (let i = 0; i < REQUESTS; i++) {
  att.push((await get(`/lessons/${lesson.id}/attendance`)).ms);
  one.push((await get(`/lessons/${lesson.id}`)).ms);
}
console.log(JSON.stringify({ figure: 'attendance 30 people x 20 sessions', p50_ms: round(median(att)), p99_ms: round(percentile(att, 99)), baseline_get_lesson_p50_ms: round(median(one)), bytes: JSON.stringify(check).length, requests: REQUESTS, load_average: loadAvg }));

// ---- listing: LESSONS lessons, page by page ----
await sql`
  INSERT INTO lessons (id, partner_id, title, mode, subject_mode, created_at, started_at, ended_at)
  SELECT 'lsn_b' || lpad(n::text, 17, '0'), ${partner.id}, 'Lesson ' || n, 'full', 'generic', now() - n * interval '1 minute',
         CASE WHEN n % 3 = 0 THEN now() - n * interval '1 minute' END, CASE WHEN n % 3 = 0 THEN now() - n * interval '1 minute' + interval '1 hour' END
  FROM generate_series(1, ${LESSONS}) n`;
await sql`ANALYZE lessons`;
const pages: number[] = [];
let next: string | null = '/lessons?limit=100';
let listed = 0;
while (next) {
  const r = await get(next.replace('/api/partner/v1', ''));
  pages.push(r.ms);
  listed += r.body.length;
  next = r.link?.match(/<([^>]+)>; rel="next"/)?.[1] ?? null;
}
const tenth = Math.max(1, Math.floor(pages.length / 10));
const first = pages.slice(1, tenth + 1); // the very first page warms the plan cache
const last = pages.slice(-tenth);
console.log(JSON.stringify({
  figure: `list ${listed} lessons, limit 100`,
  pages: pages.length,
  first_tenth_p50_ms: round(median(first)),
  first_tenth_p99_ms: round(percentile(first, 99)),
  last_tenth_p50_ms: round(median(last)),
  last_tenth_p99_ms: round(percentile(last, 99)),
  all_p99_ms: round(percentile(pages, 99)),
  load_average: loadAvg,
}));

await api.close();
await deps.close();
const admin = postgres(baseUrl, { max: 1, onnotice: () => undefined });
await admin.unsafe(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
await admin.end();
