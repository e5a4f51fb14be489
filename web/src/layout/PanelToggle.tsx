import { useEffect, useRef, useState, useSyncExternalStore } from 'react';
import type { ChatLine } from '../ui/SidePanel.js';

/**
 * On a phone held upright the board takes the screen and the people, the call and the chat sit in a
 * panel the person opens and closes (docs/board.md, "Phone layout"); this is its button, shown on
 * phones only (styles.css). A chat line from someone else while the panel is closed is counted on the
 * button and read out by screen readers; opening the panel clears it. A dot on the button says the call
 * waits for the person to join it (its preview and devices are in the panel).
 */
const PEEK_MS = 6000;

/** The phone layout's media query (styles.css, "A phone held upright"): the panel is opened and closed only there. */
const PHONE_UPRIGHT = '(max-width: 600px) and (orientation: portrait), (max-width: 600px) and (min-height: 640px)';
const phoneQuery = typeof matchMedia === 'function' ? matchMedia(PHONE_UPRIGHT) : null;
export function usePhoneLayout(): boolean {
  return useSyncExternalStore(
    (fn) => {
      phoneQuery?.addEventListener('change', fn);
      return () => phoneQuery?.removeEventListener('change', fn);
    },
    () => !!phoneQuery?.matches,
  );
}

export function PanelToggle({ open, setOpen, chat, meId, callWaiting }: { open: boolean; setOpen: (open: boolean) => void; chat: ChatLine[]; meId: string; callWaiting?: boolean }) {
  const [unread, setUnread] = useState<ChatLine[]>([]);
  /** the newest line shown over the board for a few seconds */
  const [peek, setPeek] = useState<ChatLine | null>(null);
  const seen = useRef(new Set(chat.map((l) => l.id)));
  useEffect(() => {
    const fresh = chat.filter((l) => !seen.current.has(l.id));
    for (const l of fresh) seen.current.add(l.id);
    if (open) setUnread([]);
    const others = fresh.filter((l) => l.from.id !== meId);
    if (open || !others.length) return;
    setUnread((u) => [...u, ...others].slice(-20));
    setPeek(others[others.length - 1]);
  }, [chat, open, meId]);
  useEffect(() => {
    if (!peek) return;
    const t = setTimeout(() => setPeek(null), PEEK_MS);
    return () => clearTimeout(t);
  }, [peek]);
  const last = open ? null : peek;
  return (
    <>
      <button type="button" className="panel-toggle" aria-expanded={open} aria-controls="side-panel" data-testid="panel-toggle" onClick={() => setOpen(!open)}>
        {open ? 'Back to the board' : 'People & chat'}
        {/* the call waits for the person to join it, in the panel (its camera preview and devices) */}
        {!open && callWaiting && <span className="call-waiting" data-testid="call-waiting" title="The call: join it in the panel" aria-label="join the call" />}
        {!open && unread.length > 0 && (
          <span className="unread" data-testid="unread" aria-label={`${unread.length} new`}>
            {unread.length}
          </span>
        )}
      </button>
      {!open && last && (
        <p className="chat-peek" role="status" data-testid="chat-peek" onClick={() => setOpen(true)}>
          <b>{last.from.name}:</b> {last.text}
        </p>
      )}
    </>
  );
}
