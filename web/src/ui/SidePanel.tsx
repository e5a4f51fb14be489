import { useEffect, useRef, useState } from 'react';
import { CHAT_MAX_CHARS } from '../../../realtime/protocol/limits.js';
import type { Person, ServerMessageOf } from '../../../realtime/protocol/serverMessages.js';
import type { Participant } from '../App.js';
import { CameraIcon, MicIcon } from './icons.js';

/** A chat line as the gateway sends it (`chat`, and the lines of `welcome.chat`). */
export type ChatLine = ServerMessageOf<'chat'>;

/** Participants with their roles (and the teacher's controls), then the chat. */
export function SidePanel(props: {
  me: Person;
  participants: Participant[];
  full: boolean;
  chat: ChatLine[];
  sendChat: (text: string) => boolean;
  /** grows by one each time the gateway refuses a chat line (error rate_limited, ref chat.send) */
  chatRefusals: number;
  mute: (id: string, what: { camera?: boolean; mic?: boolean }) => void;
  unmute: (id: string, what: { camera?: boolean; mic?: boolean }) => void;
  remove: (id: string) => void;
  /** who follows whom (by follower), whom I follow, and following someone (null: stop) */
  follows?: ReadonlyMap<string, string>;
  following?: string | null;
  follow?: (id: string | null) => void;
}) {
  const [draft, setDraft] = useState('');
  /**
   * The line sent and not yet answered. The input is emptied only when the
   * gateway relays it back to me; a line it refuses (the rate limit) stays in
   * the input, to be sent again, instead of being lost.
   */
  const [pending, setPending] = useState<string | null>(null);
  const list = useRef<HTMLOListElement>(null);
  useEffect(() => {
    list.current?.scrollTo({ top: list.current.scrollHeight });
    const last = props.chat[props.chat.length - 1];
    if (pending !== null && last?.from.id === props.me.id && last.text === pending) {
      setDraft((d) => (d.trim() === pending ? '' : d));
      setPending(null);
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [props.chat.length]);
  useEffect(() => setPending(null), [props.chatRefusals]);
  useEffect(() => {
    // no answer at all (the socket dropped meanwhile): the text stays, Send works again
    if (pending === null) return;
    const t = setTimeout(() => setPending(null), 5000);
    return () => clearTimeout(t);
  }, [pending]);
  const teacher = props.me.role === 'teacher';
  const nameOf = (id: string) => (id === props.me.id ? 'you' : (props.participants.find((p) => p.id === id)?.name ?? 'someone'));
  const people = [...props.participants].sort((a, b) => (a.role === b.role ? a.name.localeCompare(b.name) : a.role === 'teacher' ? -1 : 1));

  return (
    <aside className="side">
      <section className="people" aria-label="Participants">
        <h2>In the lesson · {people.length}</h2>
        <ul data-testid="participants">
          {people.map((p) => (
            <li key={p.id} className={p.id === props.me.id ? 'me' : ''}>
              <span className={`avatar ${p.role}`}>{p.name.slice(0, 1).toUpperCase()}</span>
              <span className="name">
                {p.id !== props.me.id && props.follow ? (
                  // a click on a name follows that person's view (again: stops)
                  <button
                    type="button"
                    className={`follow-name${props.following === p.id ? ' following' : ''}`}
                    aria-pressed={props.following === p.id}
                    title={props.following === p.id ? `Stop following ${p.name}` : `Follow ${p.name}'s view`}
                    onClick={() => props.follow!(props.following === p.id ? null : p.id)}
                  >
                    {p.name}
                  </button>
                ) : (
                  p.name
                )}
                {p.id === props.me.id && <span className="you"> (you)</span>}
                {props.follows?.get(p.id) && <span className="follows"> · following {nameOf(props.follows.get(p.id)!)}</span>}
              </span>
              <span className={`role ${p.role}`}>{p.role === 'teacher' ? 'Teacher' : 'Student'}</span>
              {props.full && (
                <span className="media" aria-label="camera and microphone">
                  <CameraIcon className={p.camera ? 'on' : 'off'} title={p.camera ? 'Camera on' : 'Camera off'} />
                  <MicIcon className={p.mic ? 'on' : 'off'} title={p.mic ? 'Microphone on' : 'Microphone off'} />
                </span>
              )}
              {teacher && p.role === 'student' && (
                <span className="controls">
                  {props.full && (
                    <>
                      {p.mic_blocked ? (
                        <button title="Let them turn their microphone on again" onClick={() => props.unmute(p.id, { mic: true })}>Allow mic</button>
                      ) : (
                        <button title="Turn off their microphone until you allow it" onClick={() => props.mute(p.id, { mic: true })}>Mute</button>
                      )}
                      {p.camera_blocked ? (
                        <button title="Let them turn their camera on again" onClick={() => props.unmute(p.id, { camera: true })}>Allow cam</button>
                      ) : (
                        <button title="Turn off their camera until you allow it" onClick={() => props.mute(p.id, { camera: true })}>Cam off</button>
                      )}
                    </>
                  )}
                  <button
                    className="danger"
                    title="Remove from the lesson"
                    onClick={() => window.confirm(`Remove ${p.name} from the lesson? Their link will not let them back in.`) && props.remove(p.id)}
                  >
                    Remove
                  </button>
                </span>
              )}
            </li>
          ))}
        </ul>
      </section>
      <section className="chat" aria-label="Chat">
        <h2>Chat</h2>
        {/* role=log: screen readers announce each new line (polite), not the whole list */}
        <ol ref={list} data-testid="chat" role="log" aria-live="polite" aria-relevant="additions" aria-label="Chat history">
          {props.chat.length === 0 && <li className="empty">No messages yet. Say hello!</li>}
          {props.chat.map((m) => (
            <li key={m.id} className={m.from.id === props.me.id ? 'mine' : ''}>
              <span className={`from ${m.from.role}`}>{m.from.name}</span>
              <time>{new Date(m.at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}</time>
              <p>{m.text}</p>
            </li>
          ))}
        </ol>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            const text = draft.trim();
            if (text && pending === null && props.sendChat(text)) setPending(text);
          }}
        >
          <input value={draft} maxLength={CHAT_MAX_CHARS} placeholder="Write a message…" onChange={(e) => setDraft(e.target.value)} aria-label="Message" />
          <button type="submit" disabled={!draft.trim() || pending !== null}>Send</button>
        </form>
      </section>
    </aside>
  );
}
