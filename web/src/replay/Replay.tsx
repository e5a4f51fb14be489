import { useEffect, useMemo, useRef, useState } from 'react';
import type { SubjectMode } from '../board/SubjectTools.js';
import { ReplayTimeline, type ReplayEntry } from './player.js';
import { ReplayBoard } from './ReplayBoard.js';

interface Interval {
  joined_at: string;
  left_at: string | null;
}
interface Person {
  person: string;
  name: string;
  role: string;
  intervals: Interval[];
}
interface LessonInfo {
  lesson_id: string;
  title: string;
  subject: SubjectMode;
  seq: number;
  now: string;
  attendance: { sessions: { id: string; started_at: string; ended_at: string | null; people: Person[] }[]; outside_sessions: Person[] };
}

export const SPEEDS = [1, 2, 4, 8, 16] as const;

/** Everything the replay reads, through the gateway's replay routes with the link's token (realtime/features/replay). */
async function load(token: string): Promise<{ lesson: LessonInfo; entries: ReplayEntry[] }> {
  const base = `/replay/${encodeURIComponent(token)}`;
  const get = async <T,>(path: string): Promise<T> => {
    const res = await fetch(base + path, { cache: 'no-store' });
    if (!res.ok) throw new Error(res.status === 410 ? 'This lesson was deleted.' : res.status === 401 ? 'This replay link is unknown or has expired.' : `The replay could not be loaded (${res.status}).`);
    return (await res.json()) as T;
  };
  const lesson = await get<LessonInfo>('/lesson');
  const entries: ReplayEntry[] = [];
  for (;;) {
    const page = await get<{ entries: ReplayEntry[]; more: boolean }>(`/history?after_seq=${entries.at(-1)?.seq ?? 0}`);
    entries.push(...page.entries);
    if (!page.more) break;
  }
  return { lesson, entries };
}

const clockText = (ms: number) => {
  const s = Math.max(0, Math.floor(ms / 1000));
  return `${Math.floor(s / 3600)}:${String(Math.floor(s / 60) % 60).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
};

/**
 * The replay page (docs/board.md, "History and replay"): the board as it was at any moment of the
 * lesson, a timeline with the sessions and who was present, play and pause, speeds 1x to 16x,
 * scrubbing. Read-only and nobody: it only reads the history and attendance over HTTP.
 */
export function Replay({ token }: { token: string }) {
  const [data, setData] = useState<{ lesson: LessonInfo; entries: ReplayEntry[]; loadMs: number } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [t, setT] = useState(0);
  const [playing, setPlaying] = useState(false);
  const [speed, setSpeed] = useState<number>(1);

  useEffect(() => {
    const t0 = performance.now();
    load(token).then(
      (d) => setData({ ...d, loadMs: Math.round(performance.now() - t0) }),
      (err: Error) => setError(err.message),
    );
  }, [token]);

  const now = data ? Date.parse(data.lesson.now) : 0;
  const spans = useMemo(() => (data ? data.lesson.attendance.sessions.map((s) => ({ from: Date.parse(s.started_at), to: s.ended_at ? Date.parse(s.ended_at) : now })) : []), [data, now]);
  // who was present, one row per person, every interval of theirs (sessions and outside them)
  const people = useMemo(() => {
    const by = new Map<string, Person>();
    const all = data ? [...data.lesson.attendance.sessions.flatMap((s) => s.people), ...data.lesson.attendance.outside_sessions] : [];
    for (const p of all) {
      const cur = by.get(p.person);
      if (cur) cur.intervals.push(...p.intervals);
      else by.set(p.person, { ...p, intervals: [...p.intervals] });
    }
    return [...by.values()];
  }, [data]);
  // the timeline covers every session and everyone's presence (the first arrival comes before the session starts)
  const timeline = useMemo(() => {
    if (!data) return null;
    const present = people.flatMap((p) => p.intervals.map((i) => ({ from: Date.parse(i.joined_at), to: i.left_at ? Date.parse(i.left_at) : now })));
    return new ReplayTimeline(data.entries, [...spans, ...present]);
  }, [data, spans, people, now]);

  useEffect(() => {
    if (timeline) setT(timeline.start);
  }, [timeline]);

  // playback: the replay's clock moves `speed` times as fast as the real one
  const tRef = useRef(t);
  tRef.current = t;
  useEffect(() => {
    if (!playing || !timeline) return;
    let last = performance.now();
    let frame = requestAnimationFrame(function tick(at) {
      const next = Math.min(timeline.end, tRef.current + (at - last) * speed);
      last = at;
      setT(next);
      if (next >= timeline.end) setPlaying(false);
      else frame = requestAnimationFrame(tick);
    });
    return () => cancelAnimationFrame(frame);
  }, [playing, speed, timeline]);

  if (error) return <div className="replay-error" role="alert">{error}</div>;
  if (!data || !timeline) return <div className="replay-loading" role="status">Loading the replay…</div>;

  const span = Math.max(1, timeline.end - timeline.start);
  const pos = (ms: number) => `${(((ms - timeline.start) / span) * 100).toFixed(3)}%`;
  const width = (a: number, b: number) => `${(((b - a) / span) * 100).toFixed(3)}%`;
  const seq = timeline.seqAt(t);
  const atEnd = t >= timeline.end;

  return (
    <div className="replay" data-testid="replay" data-loaded="true" data-start={timeline.start} data-end={timeline.end} data-t={Math.round(t)} data-seq={seq} data-load-ms={data.loadMs} data-ops={data.entries.length}>
      <header className="replay-head">
        <strong>{data.lesson.title}</strong>
        <span className="replay-badge">Replay · read-only</span>
      </header>
      <ReplayBoard timeline={timeline} seq={seq} subject={data.lesson.subject} lessonId={data.lesson.lesson_id} token={token} />
      <footer className="replay-controls">
        <div className="replay-buttons">
          <button
            data-testid="replay-play"
            onClick={() => {
              if (atEnd) setT(timeline.start);
              setPlaying(!playing);
            }}
          >
            {playing ? 'Pause' : 'Play'}
          </button>
          <label>
            Speed{' '}
            <select data-testid="replay-speed" value={speed} onChange={(e) => setSpeed(Number(e.target.value))}>
              {SPEEDS.map((s) => (
                <option key={s} value={s}>
                  {s}x
                </option>
              ))}
            </select>
          </label>
          <span className="replay-clock" data-testid="replay-clock">
            {clockText(t - timeline.start)} / {clockText(span)}
          </span>
        </div>
        <div className="replay-timeline">
          <div className="replay-track">
            {spans.map((s, i) => (
              <div key={i} className="replay-session" style={{ left: pos(s.from), width: width(s.from, s.to) }} title={`Session ${i + 1}`} />
            ))}
            <div className="replay-cursor" style={{ left: pos(t) }} />
          </div>
          <input
            type="range"
            data-testid="replay-scrub"
            aria-label="Moment of the lesson"
            min={0}
            max={span}
            step={1}
            value={Math.round(t - timeline.start)}
            onChange={(e) => setT(timeline.start + Number(e.target.value))}
          />
          {people.map((p) => (
            <div key={p.person} className="replay-person" data-testid="replay-person">
              <span className="replay-person-name">
                {p.name} ({p.role})
              </span>
              <div className="replay-person-track">
                {p.intervals.map((iv, i) => {
                  const from = Date.parse(iv.joined_at);
                  const to = iv.left_at ? Date.parse(iv.left_at) : now;
                  return <div key={i} className={`replay-present ${p.role}`} style={{ left: pos(from), width: width(from, to) }} />;
                })}
              </div>
            </div>
          ))}
        </div>
      </footer>
    </div>
  );
}
