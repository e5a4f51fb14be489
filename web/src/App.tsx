import { useEffect, useMemo, useReducer, useRef, useState, useSyncExternalStore } from 'react';
import type { ClientMessage } from '../../realtime/protocol/clientMessages.js';
import type { MediaState, Person, ServerMessage, ServerMessageOf } from '../../realtime/protocol/serverMessages.js';
import type { SubjectMode } from '../../src/domain/enums.js';
import { Board, type BoardHandle } from './board/Board.js';
import { Connection, type ConnState, type EndReason } from './net/connection.js';
import { PanelToggle, usePhoneLayout } from './layout/PanelToggle.js';
import { FollowBar } from './presence/FollowBar.js';
import { NOBODY_FOLLOWS, Together } from './presence/Together.js';
import { Call } from './rtc/call.js';
import { loadChoice, openMedia, type CallChoice } from './rtc/devices.js';
import { PreJoin } from './rtc/PreJoin.js';
import { SidePanel, type ChatLine } from './ui/SidePanel.js';
import { VideoTiles } from './ui/VideoTiles.js';

/** A person in the lesson as the page shows them: camera/microphone as the gateway reports them, and the teacher's blocks. */
export type Participant = Person & { camera: boolean; mic: boolean; camera_blocked?: boolean; mic_blocked?: boolean };

/** The gateway's first message with the lesson features' fields (docs/protocol.md). */
type Welcome = ServerMessageOf<'welcome'>;
type BoardMessage = Extract<ServerMessage, { type: `board.${string}` }>;

const END_TEXT: Record<EndReason, [string, string]> = {
  expired: ['This link has expired', 'Ask your teacher or the platform for a new link to the lesson.'],
  removed: ['You were removed from the lesson', 'The teacher or the platform removed you from this lesson. This link cannot be used to enter it again.'],
  replaced: ['The lesson is open in another window', 'You opened this lesson in more windows than it keeps at once, and this is the oldest. Continue here to use this window instead.'],
  archived: ['This lesson has ended', 'The lesson was closed by the platform. Its board can no longer be opened.'],
};

export function App({ token }: { token: string }) {
  const [conn, setConn] = useState<ConnState>({ kind: 'connecting', attempt: 1 });
  const [welcome, setWelcome] = useState<Welcome | null>(null);
  const [participants, setParticipants] = useState<Participant[]>([]);
  const [chat, setChat] = useState<ChatLine[]>([]);
  const [toast, setToast] = useState<string | null>(null);
  const [chatRefusals, setChatRefusals] = useState(0);
  /** the side panel on a phone (elsewhere it is always beside or under the board) */
  const [panelOpen, setPanelOpen] = useState(false);
  const phone = usePhoneLayout();
  const [, rerender] = useReducer((x: number) => x + 1, 0);
  const board = useRef<BoardHandle | null>(null);
  const early = useRef<BoardMessage[]>([]);
  const call = useRef<Call | null>(null);
  /** the camera/microphone choice of this tab (joined before: a reload joins again with it) */
  const choice = useRef<CallChoice>(loadChoice());
  const joining = useRef(false);
  const participantsRef = useRef<Participant[]>([]);
  participantsRef.current = participants;
  const connection = useRef<Connection | null>(null);
  const together = useRef<Together | null>(null);
  const togetherState = useSyncExternalStore(together.current?.subscribe ?? noSubscription, together.current?.state ?? (() => NOBODY_FOLLOWS));

  /** newest camera/microphone state per person (the gateway's), also for people whose presence arrives later */
  const media = useRef(new Map<string, MediaState>());
  const withKnownMedia = (p: Person) => withMedia({ camera: false, mic: false, ...p }, media.current.get(p.id));
  const welcomeRef = useRef<Welcome | null>(null);
  welcomeRef.current = welcome;
  /** tells the gateway my camera/microphone state (it answers everyone with media.state) */
  const reportMedia = () => {
    if (call.current) send({ type: 'media.state', camera: call.current.camera, mic: call.current.mic });
  };

  const notify = (text: string) => {
    setToast(text);
    setTimeout(() => setToast((t) => (t === text ? null : t)), 4000);
  };
  const send = (m: ClientMessage) => connection.current?.send(m) ?? false;

  useEffect(() => {
    const c = Connection.forToken(token, {
      state: (s) => {
        setConn(s);
        if (s.kind !== 'open') board.current?.disconnected();
        if (s.kind === 'ended') call.current?.stop();
      },
      message: (msg) => handle(msg),
    });
    connection.current = c;
    c.start();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [token]);

  function handle(msg: ServerMessage) {
    switch (msg.type) {
      case 'welcome': {
        const w = msg;
        const others = (w.people ?? []).filter((p) => p.id !== w.you.id);
        for (const [id, s] of Object.entries(w.media ?? {})) if ((media.current.get(id)?.v ?? -1) < s.v) media.current.set(id, s);
        together.current ??= new Together(w.you, (m) => send(m), w.limits.cursors_per_second);
        together.current.welcome(w);
        setWelcome(w);
        welcomeRef.current = w;
        setParticipants(uniq([w.you, ...others].map(withKnownMedia)));
        if (w.chat?.length) setChat((c) => mergeChat(c, w.chat!));
        if (board.current) board.current.connected();
        if (w.lesson.mode === 'full') {
          const mine = media.current.get(w.you.id);
          if (call.current) {
            // a new socket: a new call id, and every tab is asked to call this one again
            call.current.conn = w.call_id ?? '';
            call.current.setIceServers(w.ice_servers ?? []);
            call.current.block({ camera: !!mine?.camera_blocked, mic: !!mine?.mic_blocked });
            call.current.reset();
            reportMedia();
            for (const p of others) call.current.peerPresent(p.id);
          } else if (choice.current.joined && !joining.current) {
            // joined in this tab before the reload: again, with the same devices, without asking
            joining.current = true;
            void openMedia(choice.current).then(({ stream, problem }) => {
              joinCall(stream, choice.current);
              if (problem) notify(problem);
            });
          }
        }
        return;
      }
      case 'presence': {
        // docs/protocol.md: joined/left carry `person`; sync carries everyone present
        const m = msg;
        if (m.event === 'sync') {
          const ids = new Set(m.people.map((p) => p.id));
          setParticipants((ps) => uniq([...ps.filter((p) => ids.has(p.id)), ...m.people.map(withKnownMedia)]));
          for (const p of m.people) call.current?.peerPresent(p.id);
          together.current?.everyone(m.people);
          return;
        }
        const person = withKnownMedia(m.person);
        setParticipants((ps) => (m.event === 'joined' ? uniq([...ps, person]) : ps.filter((p) => p.id !== person.id)));
        // a person who joins says hello to me (rtc.hello); one who leaves takes all their tabs along
        if (m.event === 'left') call.current?.peerLeft(person.id);
        if (m.event === 'left') together.current?.left(person.id);
        else together.current?.joined(m.person);
        return;
      }
      case 'chat':
        setChat((c) => mergeChat(c, [msg]));
        return;
      case 'call.ice_servers':
        call.current?.setIceServers(msg.ice_servers);
        return;
      case 'lesson.updated': {
        // the partner renamed the lesson or changed its toolset: shown at once (a new mode comes with a reconnect)
        const w = welcomeRef.current;
        if (!w) return;
        const next = { ...w, lesson: { ...w.lesson, ...msg.lesson } };
        welcomeRef.current = next;
        setWelcome(next);
        return;
      }
      case 'rtc.hello':
      case 'rtc.offer':
      case 'rtc.answer':
      case 'rtc.ice':
      case 'rtc.bye': {
        const c = call.current;
        const m = msg;
        // signals reach every tab of my person: `to_conn` says which one they are for
        if (!c || typeof m.from_conn !== 'string' || !c.mine(m)) return;
        if (m.type === 'rtc.hello') void c.onHello(m.from, m.from_conn);
        else if (m.type === 'rtc.offer') void c.onOffer(m.from, m.from_conn, m.sdp);
        else if (m.type === 'rtc.answer') void c.onAnswer(m.from_conn, m.sdp);
        else if (m.type === 'rtc.ice') void c.onIce(m.from_conn, m.candidate);
        else c.onBye(m.from_conn);
        return;
      }
      case 'media.state': {
        const m = msg;
        // states of one person may arrive out of order from two gateway nodes: keep the newest
        if ((media.current.get(m.participant_id)?.v ?? -1) >= m.v) return;
        media.current.set(m.participant_id, m);
        setParticipants((ps) => ps.map((p) => (p.id === m.participant_id ? withMedia(p, m) : p)));
        if (m.participant_id === welcomeRef.current?.you.id && call.current) {
          call.current.block({ camera: m.camera_blocked, mic: m.mic_blocked });
          rerender();
        }
        return;
      }
      case 'muted': {
        const m = msg;
        call.current?.block({ camera: m.camera || !!call.current?.blocked.camera, mic: m.mic || !!call.current?.blocked.mic });
        notify(`The teacher turned off your ${what(m)}.`);
        reportMedia();
        return;
      }
      case 'unmuted': {
        const m = msg;
        call.current?.block({ camera: !m.camera && !!call.current?.blocked.camera, mic: !m.mic && !!call.current?.blocked.mic });
        rerender();
        notify(`The teacher allows you to turn your ${what(m)} on again.`);
        return;
      }
      case 'error': {
        const e = msg;
        if (e.ref === 'chat.send') {
          setChatRefusals((n) => n + 1);
          notify(e.code === 'rate_limited' ? 'Too many messages at once: wait a moment and press Send again.' : `Message not sent: ${e.message || e.code}`);
          return;
        }
        // A signal to a tab that just left (`not_found`) is the call's own business: the peer's tile goes
        // with its rtc.bye / presence `left`; telling the person would only alarm them.
        if (e.ref?.startsWith('rtc.') && e.code === 'not_found') return;
        notify(e.message || 'Something went wrong');
        return;
      }
      case 'board.state':
      case 'board.ops':
      case 'board.ack':
      case 'board.reject':
      case 'board.stroke':
      case 'board.resync':
        if (board.current) board.current.message(msg);
        else early.current.push(msg);
        return;
      case 'cursor':
        together.current?.cursor(msg);
        return;
      case 'cursor.leave':
        together.current?.cursorLeave(msg.from);
        return;
      case 'view':
        together.current?.view(msg);
        return;
      case 'follow':
        together.current?.followed(msg.from, msg.to);
        return;
      case 'lead':
        together.current?.leadBy(msg.by);
        return;
      case 'pong':
        return; // the page sends no ping
      default:
        return ((m: never) => m)(msg); // every server message is handled above
    }
  }

  /** Joins the call with the media chosen (none: the person sees and hears the others only). */
  function joinCall(stream: MediaStream | null, c: CallChoice) {
    const w = welcomeRef.current;
    if (!w || call.current) return stream?.getTracks().forEach((t) => t.stop());
    choice.current = c;
    const mine = media.current.get(w.you.id);
    const k = (call.current = new Call(w.you.id, w.ice_servers ?? [], (m) => send(m), rerender));
    k.conn = w.call_id ?? '';
    k.speaker = c.speakerId;
    k.block({ camera: !!mine?.camera_blocked, mic: !!mine?.mic_blocked });
    k.start(stream, { camera: c.camera, mic: c.mic });
    reportMedia();
    for (const p of participantsRef.current) k.peerPresent(p.id);
    rerender();
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
          {conn.reason === 'replaced' && (
            <button type="button" className="primary" onClick={() => location.reload()}>
              Continue here
            </button>
          )}
        </div>
      </main>
    );
  }

  return (
    <div className={`app${phone ? (panelOpen ? ' panel-open' : ' panel-closed') : ''}`}>
      <header className="topbar">
        <div className="brand">
          <span className="logo" aria-hidden>◧</span>
          <h1>{welcome?.lesson.title ?? 'Lesson'}</h1>
          {welcome && <span className="subject">{subjectLabel(welcome.lesson.subject_mode)}</span>}
        </div>
        {welcome && phone && <PanelToggle open={panelOpen} setOpen={setPanelOpen} chat={chat} meId={welcome.you.id} callWaiting={full && !call.current && !choice.current.joined} />}
        <span className={`conn ${conn.kind}`} data-testid="connection" data-state={conn.kind}>
          <span className="dot" />
          {status}
        </span>
      </header>
      <div className="body">
        <main className="main">
          {welcome && me ? (
            <Board together={together.current ?? undefined} lessonId={welcome.lesson.id} token={token} role={me.role} subject={welcome.lesson.subject_mode} maxFrameBytes={welcome.limits?.max_payload_bytes ?? 65_536} send={send} notify={notify} onReady={onBoardReady} />
          ) : (
            <div className="loading">Joining the lesson…</div>
          )}
          {together.current && <FollowBar together={together.current} present={(id) => participants.some((p) => p.id === id)} />}
        </main>
        {welcome && me && (
          <div className="side-wrap" id="side-panel">
            {full && call.current && <VideoTiles call={call.current} me={{ ...me, camera: call.current.camera, mic: call.current.mic }} participants={participants} changed={reportMedia} />}
            {full && !call.current && !choice.current.joined && <PreJoin name={me.name} choice={choice.current} onJoin={joinCall} />}
            <SidePanel
              me={me}
              participants={participants}
              full={full}
              chat={chat}
              sendChat={(text) => send({ type: 'chat.send', text })}
              chatRefusals={chatRefusals}
              mute={(id, what) => send({ type: 'teacher.mute', participant_id: id, camera: !!what.camera, mic: !!what.mic })}
              unmute={(id, what) => send({ type: 'teacher.unmute', participant_id: id, camera: !!what.camera, mic: !!what.mic })}
              remove={(id) => send({ type: 'teacher.remove', participant_id: id })}
              follows={togetherState.follows}
              following={togetherState.following}
              follow={(id) => together.current?.follow(id)}
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

const noSubscription = () => () => {};

function withMedia(p: Participant, s: MediaState | undefined): Participant {
  return s ? { ...p, camera: s.camera, mic: s.mic, camera_blocked: s.camera_blocked, mic_blocked: s.mic_blocked } : p;
}

/** Chat lines by id: the history in a welcome after a reconnect overlaps what the page has. */
function mergeChat(have: ChatLine[], more: ChatLine[]): ChatLine[] {
  const ids = new Set(have.map((l) => l.id));
  return [...have, ...more.filter((l) => !ids.has(l.id))].sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0)).slice(-200);
}

const what = (m: { camera: boolean; mic: boolean }) => [m.camera && 'camera', m.mic && 'microphone'].filter(Boolean).join(' and ');

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
