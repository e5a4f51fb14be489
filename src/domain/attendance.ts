import type { Db, Sql } from '../db/index.js';
import { recordEvents } from '../events/outbox.js';
import type { Role } from './enums.js';
import { personRef, publicPersonId } from './people.js';

/** A person became present (joined) or stopped being present in a lesson, as presence decided it. */
export interface PresenceMark {
  lessonId: string;
  /** the public id in the lesson (publicPersonId) */
  personId: string;
  joined: boolean;
  /** the link of an arrival (every connection is one; the first while absent opens an interval) */
  linkId: string | null;
  at: Date;
}

/**
 * Appends marks in one statement, and stamps each arrival's link as used. Marks are
 * facts with their own dates: written late or twice (a retried batch whose commit
 * was lost), they pair into the same intervals (a second join while present, a
 * second departure while absent, change nothing).
 */
export async function recordPresenceMarks(sql: Sql, marks: PresenceMark[]): Promise<void> {
  if (marks.length === 0) return;
  await sql.begin(async (tx) => {
    await tx`
      INSERT INTO presence_marks (lesson_id, person_id, joined, link_id, at)
      SELECT l, p, j::boolean, k, t
      FROM unnest(${marks.map((m) => m.lessonId)}::text[], ${marks.map((m) => m.personId)}::text[],
                  ${marks.map((m) => (m.joined ? 'true' : 'false'))}::text[], ${marks.map((m) => m.linkId) as string[]}::text[],
                  ${marks.map((m) => m.at.toISOString())}::timestamptz[]) AS x(l, p, j, k, t)`; // postgres.js sends no boolean[]
    await recordLeftEvents(tx, marks.filter((m) => !m.joined));
    const used = new Map<string, Date>();
    for (const m of marks) if (m.linkId && !(used.get(m.linkId)! >= m.at)) used.set(m.linkId, m.at);
    if (used.size === 0) return;
    const ids = [...used.keys()].sort(); // one lock order for concurrent batches
    await tx`
      UPDATE links k SET last_used_at = GREATEST(k.last_used_at, u.at)
      FROM unnest(${ids}::text[], ${ids.map((id) => used.get(id)!.toISOString())}::timestamptz[]) AS u(id, at)
      WHERE k.id = u.id`;
  });
}

/**
 * `participant.left` for departures: each names the interval it ends, which began at the
 * person's first arrival after their departure before (the marks written so far, this batch's
 * included). A departure whose arrival is not written yet (the arrival's node is slower than the
 * departure's, within a few milliseconds) has no interval to name and sends nothing.
 */
async function recordLeftEvents(tx: Db, left: PresenceMark[]): Promise<void> {
  if (left.length === 0) return;
  const rows = await tx<{ partner_id: string; lesson_id: string; external_id: string | null; user_hash: string; name: string; role: Role; link_id: string; joined_at: Date; left_at: Date }[]>`
    SELECT k.partner_id, lv.l AS lesson_id, les.external_id, k.user_hash, k.name, k.role, s.link_id, s.at AS joined_at, lv.t AS left_at
    FROM unnest(${left.map((m) => m.lessonId)}::text[], ${left.map((m) => m.personId)}::text[], ${left.map((m) => m.at.toISOString())}::timestamptz[]) AS lv(l, p, t)
    CROSS JOIN LATERAL (
      SELECT j.at, j.link_id FROM presence_marks j
      WHERE j.lesson_id = lv.l AND j.person_id = lv.p AND j.joined AND j.at <= lv.t
        AND j.at > COALESCE((SELECT max(d.at) FROM presence_marks d
                             WHERE d.lesson_id = lv.l AND d.person_id = lv.p AND NOT d.joined AND d.at < lv.t), '-infinity')
      ORDER BY j.at LIMIT 1) s
    JOIN links k ON k.id = s.link_id
    JOIN lessons les ON les.id = lv.l`;
  await recordEvents(
    tx,
    rows.map((r) => ({
      partnerId: r.partner_id,
      type: 'participant.left' as const,
      data: {
        lesson_id: r.lesson_id,
        external_id: r.external_id,
        role: r.role,
        name: r.name,
        person: personRef(r.user_hash),
        link_id: r.link_id,
        joined_at: r.joined_at.toISOString(),
        left_at: r.left_at.toISOString(),
        seconds: Math.max(0, Math.floor((r.left_at.getTime() - r.joined_at.getTime()) / 1000)),
      },
      at: r.left_at,
    })),
  );
}

export interface Interval {
  joined_at: Date;
  /** null while the person is present */
  left_at: Date | null;
}

export interface AttendingPerson {
  person: string;
  role: Role;
  name: string;
  link_ids: string[];
  intervals: Interval[];
  present_seconds: number;
}

export interface SessionAttendance {
  id: number;
  started_at: Date;
  ended_at: Date | null;
  seconds: number;
  people: AttendingPerson[];
}

export interface Attendance {
  sessions: SessionAttendance[];
  /** presence after the last ended session while no session runs (someone waiting alone) */
  outside_sessions: AttendingPerson[];
}

interface LinkRow {
  id: string;
  user_hash: string;
  name: string;
  role: Role;
  created_at: Date;
}

/**
 * Who was present in each session of a lesson, paired from its presence marks.
 * An interval belongs to the session in whose span it began: a session's span
 * runs from the end of the session before (the lesson was empty then) to its
 * own end, so the teacher waiting before the student came is in the session
 * they then held. A session ends only when nobody is present, so no interval
 * crosses a session's end. Open intervals count up to `now`.
 */
export async function readAttendance(db: Db, lessonId: string, now: Date, sessionId?: number): Promise<Attendance | undefined> {
  const [sessions, marks, links] = await Promise.all([
    db<{ id: string; started_at: Date; ended_at: Date | null; seconds: string }[]>`
      SELECT id, started_at, ended_at, seconds FROM sessions WHERE lesson_id = ${lessonId} ORDER BY started_at, id`,
    db<{ person_id: string; joined: boolean; link_id: string | null; at: Date }[]>`
      SELECT person_id, joined, link_id, at FROM presence_marks WHERE lesson_id = ${lessonId} ORDER BY at, id`,
    db<LinkRow[]>`SELECT id, user_hash, name, role, created_at FROM links WHERE lesson_id = ${lessonId} ORDER BY created_at, id`,
  ]);
  if (sessionId !== undefined && !sessions.some((s) => Number(s.id) === sessionId)) return undefined;

  const linkById = new Map(links.map((l) => [l.id, l]));
  const hashOf = new Map<string, string>(); // public id -> user hash
  for (const l of links) hashOf.set(publicPersonId(lessonId, l.user_hash), l.user_hash);

  // pair marks per person: a join opens (unless open), a departure closes (if open)
  const open = new Map<string, { joined_at: Date; links: Set<string> }>();
  const pieces: { personId: string; interval: Interval; links: Set<string> }[] = [];
  for (const m of marks) {
    const cur = open.get(m.person_id);
    if (m.joined) {
      if (cur) {
        if (m.link_id) cur.links.add(m.link_id);
        continue;
      }
      open.set(m.person_id, { joined_at: m.at, links: new Set(m.link_id ? [m.link_id] : []) });
    } else if (cur) {
      open.delete(m.person_id);
      pieces.push({ personId: m.person_id, interval: { joined_at: cur.joined_at, left_at: m.at }, links: cur.links });
    }
  }
  for (const [personId, cur] of open) pieces.push({ personId, interval: { joined_at: cur.joined_at, left_at: null }, links: cur.links });
  pieces.sort((a, b) => a.interval.joined_at.getTime() - b.interval.joined_at.getTime());

  const spans = sessions.map((s, i) => ({ after: i > 0 ? sessions[i - 1].ended_at : null, s }));
  const sessionOf = (joinedAt: number) =>
    spans.find(({ after, s }) => (after === null || joinedAt > after.getTime()) && (s.ended_at === null || joinedAt <= s.ended_at.getTime()))?.s;

  const groups = new Map<string | null, Map<string, { links: Set<string>; intervals: Interval[] }>>();
  for (const p of pieces) {
    const key = sessionOf(p.interval.joined_at.getTime())?.id ?? null;
    let people = groups.get(key);
    if (!people) groups.set(key, (people = new Map()));
    let person = people.get(p.personId);
    if (!person) people.set(p.personId, (person = { links: new Set(), intervals: [] }));
    for (const l of p.links) person.links.add(l);
    person.intervals.push(p.interval);
  }

  const present = (personId: string, g: { links: Set<string>; intervals: Interval[] }): AttendingPerson | undefined => {
    const linkIds = [...g.links];
    // name and role as on the latest link the person came through (else their latest link in the lesson)
    const hash = hashOf.get(personId);
    if (!hash) return undefined; // a mark is only ever written for a link of the lesson
    const latest = [...linkIds].map((id) => linkById.get(id)).filter((l): l is LinkRow => !!l).pop() ??
      links.filter((l) => l.user_hash === hash).pop();
    const ms = g.intervals.reduce((sum, i) => sum + ((i.left_at ?? now).getTime() - i.joined_at.getTime()), 0);
    return {
      person: personRef(hash),
      role: latest?.role ?? 'student',
      name: latest?.name ?? '',
      link_ids: linkIds,
      intervals: g.intervals,
      present_seconds: Math.max(0, Math.floor(ms / 1000)),
    };
  };
  const peopleOf = (key: string | null) =>
    [...(groups.get(key) ?? new Map()).entries()].map(([id, g]) => present(id, g)).filter((p): p is AttendingPerson => !!p);

  return {
    sessions: sessions
      .filter((s) => sessionId === undefined || Number(s.id) === sessionId)
      .map((s) => ({ id: Number(s.id), started_at: s.started_at, ended_at: s.ended_at, seconds: Number(s.seconds), people: peopleOf(s.id) })),
    outside_sessions: sessionId === undefined ? peopleOf(null) : [],
  };
}
