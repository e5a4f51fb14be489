import { nextPageName } from '../../../src/board/reducer.js';
import type { BoardOp } from '../../../src/board/schema.js';
import type { Role } from '../../../src/domain/enums.js';
import { useEffect, useRef, useState } from 'react';
import { PinIcon } from '../ui/icons.js';
import type { SyncView } from './sync.js';

const newPageId = () => `pg-${Math.random().toString(36).slice(2, 12)}`;
/** A finger held this long on a tab picks it up to be moved (a shorter touch taps it, a move scrolls the tabs). */
const LONG_PRESS_MS = 350;
/** A finger that moves this far before the long press scrolls the tabs instead. */
const SLOP_PX = 8;

/**
 * Page tabs. Everyone can add and rename pages (double-click or F2: the name is edited in place on
 * its tab, Enter keeps it, Esc drops it); a teacher can also delete pages, pin one (everyone is
 * moved to it, students cannot leave it) and reorder them by dragging a tab onto another: with the
 * mouse (HTML drag and drop), or on a touch screen by holding a tab until it lifts, then sliding it.
 * The server enforces the same rules (src/board/apply.ts; both sides apply operations with src/board/reducer.ts).
 *
 * Only the tabs scroll sideways when there are more than fit: `+` and the pin stay on screen,
 * and the current tab is scrolled into view whenever it changes.
 */
export function PageBar(props: { view: SyncView; role: Role; locked: boolean; goTo: (id: string) => void; submit: (op: BoardOp) => void }) {
  const { view, role } = props;
  const teacher = role === 'teacher';
  /** the page whose name is being edited on its tab */
  const [editing, setEditing] = useState<string | null>(null);
  const rename = (id: string) => setEditing(id);
  const renamed = (id: string, name: string, next: string) => {
    setEditing(null);
    const v = next.trim().slice(0, 60);
    if (v && v !== name) props.submit({ type: 'page.rename', page_id: id, name: v });
  };
  /** the tab being dragged (teachers reorder pages) */
  const dragged = useRef<string | null>(null);
  const dropOn = (target: string) => {
    const from = dragged.current;
    dragged.current = null;
    if (!from || from === target) return;
    const ids = view.pages.map((p) => p.id).filter((id) => id !== from);
    const at = ids.indexOf(target) + (view.pages.findIndex((p) => p.id === from) < view.pages.findIndex((p) => p.id === target) ? 1 : 0);
    ids.splice(at, 0, from);
    props.submit({ type: 'page.reorder', page_ids: ids });
  };
  const tabs = useRef<HTMLDivElement>(null);
  /** a touch on a tab that may become a drag (held long enough), and the tab it is over */
  const touch = useRef<{ id: number; page: string; x: number; y: number; timer: ReturnType<typeof setTimeout> | null } | null>(null);
  const [lifted, setLifted] = useState<string | null>(null);
  const [over, setOver] = useState<string | null>(null);
  const pageAt = (x: number, y: number) => (document.elementFromPoint(x, y)?.closest('[data-page-id]') as HTMLElement | null)?.dataset.pageId ?? null;
  const endTouch = () => {
    if (touch.current?.timer) clearTimeout(touch.current.timer);
    touch.current = null;
    setLifted(null);
    setOver(null);
  };
  const touchStart = (page: string, e: React.TouchEvent) => {
    if (!teacher || editing === page || e.touches.length !== 1) return;
    const t = e.touches[0];
    const held = { id: t.identifier, page, x: t.clientX, y: t.clientY, timer: null as ReturnType<typeof setTimeout> | null };
    held.timer = setTimeout(() => {
      held.timer = null;
      setLifted(page);
      setOver(page);
    }, LONG_PRESS_MS);
    touch.current = held;
  };
  // touchmove must be able to stop the tabs scrolling while a tab is carried: a listener that is not passive
  useEffect(() => {
    const el = tabs.current;
    if (!el) return;
    const move = (e: TouchEvent) => {
      const held = touch.current;
      const t = held && [...e.changedTouches].find((c) => c.identifier === held.id);
      if (!held || !t) return;
      if (held.timer) {
        // moved before the long press: the person scrolls the tabs
        if (Math.hypot(t.clientX - held.x, t.clientY - held.y) > SLOP_PX) endTouch();
        return;
      }
      e.preventDefault();
      setOver(pageAt(t.clientX, t.clientY));
    };
    const end = (e: TouchEvent) => {
      const held = touch.current;
      const t = held && [...e.changedTouches].find((c) => c.identifier === held.id);
      if (!held || !t) return;
      if (!held.timer) {
        e.preventDefault(); // no click on the tab it was dropped on
        const target = pageAt(t.clientX, t.clientY);
        dragged.current = held.page;
        if (target && e.type === 'touchend') dropOn(target);
      }
      endTouch();
    };
    el.addEventListener('touchmove', move, { passive: false });
    el.addEventListener('touchend', end, { passive: false });
    el.addEventListener('touchcancel', end);
    return () => {
      el.removeEventListener('touchmove', move);
      el.removeEventListener('touchend', end);
      el.removeEventListener('touchcancel', end);
    };
  });
  useEffect(() => {
    tabs.current?.querySelector('.page-tab-wrap.current')?.scrollIntoView({ block: 'nearest', inline: 'nearest' });
  }, [view.page, view.pages.length]);
  return (
    <nav className="pagebar" aria-label="Pages">
      <div className="page-tabs" ref={tabs}>
        {view.pages.map((p, i) => (
          <span
            key={p.id}
            className={`page-tab-wrap${p.id === view.page ? ' current' : ''}${lifted === p.id ? ' lifted' : ''}${lifted && over === p.id && lifted !== p.id ? ' drop-target' : ''}`}
            data-page-id={p.id}
            data-lifted={lifted === p.id ? 'true' : undefined}
            draggable={teacher && editing !== p.id}
            onTouchStart={(e) => touchStart(p.id, e)}
            // a long press opens no context menu on a tab a teacher can carry
            onContextMenu={(e) => teacher && e.preventDefault()}
            onDragStart={(e) => {
              dragged.current = p.id;
              e.dataTransfer.effectAllowed = 'move';
            }}
            onDragOver={(e) => teacher && dragged.current && e.preventDefault()}
            onDrop={(e) => {
              e.preventDefault();
              dropOn(p.id);
            }}
            data-testid={`page-tab-wrap-${i}`}
          >
            {editing === p.id ? (
              <input
                className="page-rename"
                aria-label={`Rename page ${p.name}`}
                defaultValue={p.name}
                maxLength={60}
                autoFocus
                onFocus={(e) => e.target.select()}
                onKeyDown={(e) => {
                  // Enter keeps the name, Esc the old one; leaving the field keeps what was typed
                  if (e.key === 'Escape') e.currentTarget.value = p.name;
                  if (e.key === 'Enter' || e.key === 'Escape') e.currentTarget.blur();
                  e.stopPropagation(); // not the editor's shortcuts
                }}
                onBlur={(e) => renamed(p.id, p.name, e.currentTarget.value)}
                data-testid={`page-rename-${i}`}
              />
            ) : (
            <button
              className={`page-tab${p.id === view.page ? ' current' : ''}${p.id === view.pinned ? ' pinned' : ''}`}
              aria-current={p.id === view.page ? 'page' : undefined}
              disabled={props.locked && p.id !== view.pinned}
              onClick={() => props.goTo(p.id)}
              onDoubleClick={() => rename(p.id)}
              // F2 renames, as in a file manager: the keyboard's double-click
              onKeyDown={(e) => e.key === 'F2' && rename(p.id)}
              title={p.id === view.pinned ? 'Pinned by the teacher' : teacher ? 'Double-click or F2 to rename; drag to reorder' : 'Double-click or F2 to rename'}
              data-testid={`page-tab-${i}`}
            >
              {p.id === view.pinned && <PinIcon title="pinned" />}
              {p.name}
            </button>
            )}
            {teacher && view.pages.length > 1 && p.id === view.page && (
              // a button of its own beside the tab (not inside it): reachable with Tab, pressed with Enter or Space
              <button
                className="page-close"
                aria-label={`Delete page ${p.name}`}
                title="Delete this page"
                onClick={() => window.confirm(`Delete "${p.name}" and everything on it?`) && props.submit({ type: 'page.delete', page_id: p.id })}
              >
                ×
              </button>
            )}
          </span>
        ))}
      </div>
      {!props.locked && (
        <button
          className="page-add"
          aria-label="Add page"
          onClick={() => props.submit({ type: 'page.add', page: { id: newPageId(), name: nextPageName(view.pages) }, after_page_id: null })}
        >
          +
        </button>
      )}
      <span className="pagebar-spacer" />
      {teacher &&
        (view.pinned === view.page ? (
          <button className="pin-button active" onClick={() => props.submit({ type: 'page.pin', page_id: null })} data-testid="unpin" aria-label="Unpin page" title="Unpin page">
            <PinIcon /> <span className="pin-label">Unpin page</span>
          </button>
        ) : (
          <button className="pin-button" onClick={() => props.submit({ type: 'page.pin', page_id: view.page })} data-testid="pin" aria-label="Pin this page for everyone" title="Pin this page for everyone">
            <PinIcon /> <span className="pin-label">Pin this page for everyone</span>
          </button>
        ))}
      {!teacher && props.locked && <span className="pin-note">The teacher pinned this page</span>}
    </nav>
  );
}
