import type postgres from 'postgres';

/**
 * Seeds the bench database with SQL only (generate_series, seeded random()):
 * `partners` partners, each with `lessons` lessons (every fifth board-only),
 * 25 top-ups over the year (every fifth free), `sessions` ended sessions of
 * 10-100 minutes spread over the year before `now`, 16 running sessions, and
 * the usage_daily rows the charging path would have written (split at Moscow
 * midnight, board fraction floored cumulatively), with the lessons' start and
 * end, balances and the report rollups that match (billed_seconds is the sum
 * of a lesson's sessions, read through lessons_billed).
 */
export interface SeedShape {
  partners: number;
  lessons: number;
  sessions: number;
  now: Date;
}

export const partnerId = (i: number) => `ptr_bench_${i}`;

export async function seed(sql: postgres.Sql<any>, shape: SeedShape): Promise<void> {
  const { partners, lessons, sessions, now } = shape;
  // Row triggers (the report rollups, foreign keys) would cost minutes on 4.5M
  // rows: they are off while seeding, and the rollups are rebuilt at the end by
  // the same functions the migration backfills with. `sql` has one connection.
  await sql`SET session_replication_role = replica`;
  await sql`SELECT setseed(0.42)`;
  await sql`
    INSERT INTO partners (id, name, plan, board_rate_percent, user_hash_key)
    SELECT 'ptr_bench_' || p, 'Bench partner ' || p, 'full', 30, decode(md5(p::text), 'hex')
    FROM generate_series(1, ${partners}) p`;
  await sql`
    INSERT INTO lessons (id, partner_id, external_id, title, mode, subject_mode, created_at)
    SELECT 'lsn_b' || p || '_' || l, 'ptr_bench_' || p, 'ext-' || l, 'Lesson ' || l,
           CASE WHEN l % 5 = 0 THEN 'board_only' ELSE 'full' END, 'generic',
           ${now}::timestamptz - interval '400 days'
    FROM generate_series(1, ${partners}) p, generate_series(1, ${lessons}) l`;
  await sql`
    INSERT INTO topups (partner_id, seconds, rub, created_at)
    SELECT 'ptr_bench_' || p, 60 * 600000,
           CASE WHEN t % 5 = 4 THEN 0 ELSE 1000000 + (random() * 500000)::int END,
           ${now}::timestamptz - interval '380 days' + t * interval '15 days'
    FROM generate_series(1, ${partners}) p, generate_series(0, 24) t`;
  // Ended sessions at random whole seconds of the last year.
  await sql`
    INSERT INTO sessions (lesson_id, partner_id, mode, rate_percent, started_at, ended_at, seconds, charged_seconds, people_max)
    SELECT l.id, l.partner_id, l.mode, r.rate, g.start, g.start + make_interval(secs => g.secs + 300), g.secs,
           (g.secs * r.rate) / 100, g.people
    FROM (
      SELECT p, 1 + (random() * ${lessons - 1})::int AS l,
             date_trunc('second', ${now}::timestamptz - random() * interval '365 days' + interval '2 hours') AS start,
             600 + (random() * 5400)::int AS secs, 2 + (random() * 28)::int AS people
      FROM generate_series(1, ${partners}) p, generate_series(1, ${sessions}) n
    ) g
    JOIN lessons l ON l.id = 'lsn_b' || g.p || '_' || g.l
    CROSS JOIN LATERAL (SELECT CASE WHEN l.mode = 'full' THEN 100 ELSE 30 END AS rate) r
    WHERE g.start + make_interval(secs => g.secs) < ${now}::timestamptz
    ORDER BY g.start`; // rows land in time order, every partner's interleaved, as in production
  // 16 running sessions per partner (the full ones among its last 20 lessons), metered up to a few seconds ago.
  await sql`
    INSERT INTO sessions (lesson_id, partner_id, mode, rate_percent, started_at, seconds, charged_seconds, people_max)
    SELECT l.id, l.partner_id, l.mode, 100, ${now}::timestamptz - make_interval(secs => 600 + k * 60), 595 + k * 60, 595 + k * 60, 3
    FROM generate_series(1, ${partners}) p
    CROSS JOIN generate_series(1, 20) k
    JOIN lessons l ON l.id = 'lsn_b' || p || '_' || (${lessons} + 1 - k) AND l.mode = 'full'`;
  await sql`
    INSERT INTO usage_daily (session_id, day, partner_id, lesson_id, mode, seconds, charged_seconds)
    SELECT s.id, d.day, s.partner_id, s.lesson_id, s.mode, d.secs, d.charged
    FROM sessions s
    CROSS JOIN LATERAL (
      SELECT (s.started_at AT TIME ZONE 'Europe/Moscow')::date AS day0,
             least(s.seconds, extract(epoch FROM
               (date_trunc('day', s.started_at AT TIME ZONE 'Europe/Moscow') + interval '1 day') AT TIME ZONE 'Europe/Moscow'
               - s.started_at)::bigint) AS first
    ) m
    CROSS JOIN LATERAL (VALUES
      (m.day0, m.first, (m.first * s.rate_percent) / 100),
      (m.day0 + 1, s.seconds - m.first, s.charged_seconds - (m.first * s.rate_percent) / 100)
    ) d(day, secs, charged)
    WHERE d.secs > 0
    ORDER BY greatest(s.started_at, (d.day::timestamp AT TIME ZONE 'Europe/Moscow'))`; // when the charging path first writes the row
  await sql`
    UPDATE lessons l SET started_at = t.started_at, ended_at = t.ended_at
    FROM (SELECT DISTINCT ON (lesson_id) lesson_id, started_at, ended_at
          FROM sessions ORDER BY lesson_id, started_at DESC) t
    WHERE l.id = t.lesson_id`;
  await sql`
    UPDATE partners p SET balance_seconds =
      (SELECT coalesce(sum(seconds), 0) FROM topups WHERE partner_id = p.id)
      - (SELECT coalesce(sum(charged_seconds), 0) FROM sessions WHERE partner_id = p.id)
    WHERE p.id LIKE 'ptr_bench_%'`;
  await sql`SET session_replication_role = DEFAULT`;
  await sql`SELECT reports_rebuild_usage(id), reports_rebuild_calls(id, '-infinity') FROM partners`;
}
