import { useEffect, useMemo, useReducer, useRef, useState } from 'react';
import type { Participant, ServerMessage } from '../../src/board/protocol.js';
import { Board, type BoardHandle } from './board/Board.js';
import type { SubjectMode } from './board/SubjectTools.js';
import { Connection, type ConnState, type EndReason } from './net/connection.js';
import { Call } from './rtc/call.js';
import { SidePanel, type ChatLine } from './ui/SidePanel.js';
import { VideoTiles } from './ui/VideoTiles.js';

/** The gateway's first message (docs/protocol.md; the board feature adds `ice_servers`). */
interface Welcome {
  type: 'welcome';
  you: Participant;
  /** everyone present, me included */
  people: Participant[];
  lesson: { title: string; mode: 'full' | 'board_only'; subject_mode: SubjectMode };
  ice_servers?: RTCIceServer[];
}

const END_TEXT: Record<EndReason, [string, string]> = {
  expired: ['This link has expired', 'Ask your teacher or the platform for a new link to the lesson.'],
  removed: ['You were removed from the lesson', 'The teacher removed you from this lesson. This link cannot be used to enter it again.'],
  archived: ['This lesson has ended', 'The lesson was closed by the platform. Its board can no longer be opened.'],
  unreachable: ['Cannot reach the lesson', 'Check your connection and reload the page.'],
};

export function App({ token }: { token: string }) {
  const [conn, setConn] = useState<ConnState>({ kind: 'connecting', attempt: 1 });
  const [welcome, setWelcome] = useState<Welcome | null>(null);
  const [participants, setParticipants] = useState<Participant[]>([]);
  const [chat, setChat] = useState<ChatLine[]>([]);
  const [toast, setToast] = useState<string | null>(null);
  const [, rerender] = useReducer((x: number) => x + 1, 0);
  const board = useRef<BoardHandle | null>(null);
  const early = useRef<ServerMessage[]>([]);
  const call = useRef<Call | null>(null);
  const connection = useRef<Connection | null>(null);

  const notify = (text: string) => {
    setToast(text);
    setTimeout(() => setToast((t) => (t === text ? null : t)), 4000);
  };
  const send = (m: object) => connection.current?.send(m) ?? false;

  useEffect(() => {
    const c = Connection.forToken(token, {
      state: (s) => {
        setConn(s);
        if (s.kind !== 'open') board.current?.disconnected();
        if (s.kind === 'ended') call.current?.stop();
      },
      message: (raw) => handle(raw as unknown as ServerMessage | Welcome | { type: string; [k: string]: unknown }),
    });
    connection.current = c;
    c.start();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [token]);

  function handle(msg: ServerMessage | Welcome | { type: string; [k: string]: unknown }) {
    switch (msg.type) {
      case 'welcome': {
        const w = msg as Welcome;
        const others = (w.people ?? []).filter((p) => p.id !== w.you.id);
        setWelcome(w);
        setParticipants(uniq([w.you, ...others]));
        if (board.current) board.current.connected();
        if (w.lesson.mode === 'full') {
          if (!call.current) {
            call.current = new Call(w.you.id, w.ice_servers ?? [], (m) => send(m), rerender);
            void call.current.start().then(() => {
              send({ type: 'media.state', camera: call.current!.camera, mic: call.current!.mic });
              for (const p of others) call.current!.peerPresent(p.id);
            });
          } else {
            call.current.reset();
            for (const p of others) call.current.peerPresent(p.id);
          }
        }
        return;
      }
      case 'presence': {
        // docs/protocol.md: joined/left carry `person`; sync carries everyone present
        const m = msg as unknown as { event: 'joined' | 'left' | 'sync'; person?: Participant; people?: Participant[] };
        if (m.event === 'sync' && m.people) {
          const ids = new Set(m.people.map((p) => p.id));
          setParticipants((ps) => uniq([...ps.filter((p) => ids.has(p.id)), ...m.people!]));
          for (const p of m.people) call.current?.peerPresent(p.id);
          return;
        }
        if (!m.person) return;
        const person = m.person;
        setParticipants((ps) => (m.event === 'joined' ? uniq([...ps, person]) : ps.filter((p) => p.id !== person.id)));
        if (m.event === 'joined') call.current?.peerPresent(person.id);
        else call.current?.peerLeft(person.id);
        return;
      }
      case 'chat':
        setChat((c) => [...c.slice(-199), msg as ChatLine]);
        return;
      case 'rtc.offer':
        void call.current?.onOffer(msg.from as string, msg.sdp as string);
        return;
      case 'rtc.answer':
        void call.current?.onAnswer(msg.from as string, msg.sdp as string);
        return;
      case 'rtc.ice':
        void call.current?.onIce(msg.from as string, msg.candidate as RTCIceCandidateInit);
        return;
      case 'media.state': {
        const m = msg as Extract<ServerMessage, { type: 'media.state' }>;
        setParticipants((ps) => ps.map((p) => (p.id === m.participant_id ? { ...p, camera: m.camera, mic: m.mic } : p)));
        return;
      }
      case 'muted': {
        const m = msg as Extract<ServerMessage, { type: 'muted' }>;
        if (m.camera) call.current?.setCamera(false);
        if (m.mic) call.current?.setMic(false);
        notify(`The teacher turned off your ${[m.camera && 'camera', m.mic && 'microphone'].filter(Boolean).join(' and ')}.`);
        if (call.current) send({ type: 'media.state', camera: call.current.camera, mic: call.current.mic });
        return;
      }
      case 'error':
        notify(String((msg as { message?: string }).message ?? 'Something went wrong'));
        return;
      default:
        if (msg.type.startsWith('board.')) {
          if (board.current) board.current.message(msg as ServerMessage);
          else early.current.push(msg as ServerMessage);
        }
    }
  }

  const onBoardReady = (h: BoardHandle) => {
    board.current = h;
    if (conn.kind === 'open' || welcome) h.connected();
    for (const m of early.current.splice(0)) h.message(m);
  };

  const me = welcome?.you;
  const full = welcome?.lesson.mode === 'full';
  const status = useMemo(() => statusText(conn), [conn]);

  if (conn.kind === 'ended') {
    const [title, text] = END_TEXT[conn.reason];
    return (
      <main className="ended" data-testid="ended">
        <div className="ended-card">
          <h1>{title}</h1>
          <p>{text}</p>
        </div>
      </main>
    );
  }

  return (
    <div className="app">
      <header className="topbar">
        <div className="brand">
          <span className="logo" aria-hidden>◧</span>
          <h1>{welcome?.lesson.title ?? 'Lesson'}</h1>
          {welcome && <span className="subject">{subjectLabel(welcome.lesson.subject_mode)}</span>}
        </div>
        <span className={`conn ${conn.kind}`} data-testid="connection" data-state={conn.kind}>
          <span className="dot" />
          {status}
        </span>
      </header>
      <div className="body">
        <main className="main">
          {welcome && me ? (
            <Board role={me.role} subject={welcome.lesson.subject_mode} send={send} notify={notify} onReady={onBoardReady} />
          ) : (
            <div className="loading">Joining the lesson…</div>
          )}
        </main>
        {welcome && me && (
          <div className="side-wrap">
            {full && call.current && <VideoTiles call={call.current} me={{ ...me, camera: call.current.camera, mic: call.current.mic }} participants={participants} />}
            <SidePanel
              me={me}
              participants={participants}
              full={full}
              chat={chat}
              sendChat={(text) => send({ type: 'chat.send', text })}
              mute={(id, what) => send({ type: 'teacher.mute', participant_id: id, camera: !!what.camera, mic: !!what.mic })}
              remove={(id) => send({ type: 'teacher.remove', participant_id: id })}
            />
          </div>
        )}
      </div>
      {toast && (
        <div className="toast" role="status">
          {toast}
        </div>
      )}
    </div>
  );
}

function uniq(ps: Participant[]): Participant[] {
  const m = new Map<string, Participant>();
  for (const p of ps) {
    const prev = m.get(p.id);
    m.set(p.id, { ...prev, ...p, camera: p.camera ?? prev?.camera ?? false, mic: p.mic ?? prev?.mic ?? false });
  }
  return [...m.values()];
}

function statusText(s: ConnState): string {
  if (s.kind === 'open') return 'Connected';
  if (s.kind === 'connecting') return s.attempt > 1 ? 'Reconnecting…' : 'Connecting…';
  if (s.kind === 'reconnecting') return `Connection lost, retrying in ${Math.ceil(s.inMs / 1000)} s`;
  return 'Disconnected';
}

function subjectLabel(m: SubjectMode): string {
  return m === 'math' ? 'Maths board' : m === 'physics' ? 'Physics board' : 'Board';
}
