import { nextPageName } from '../../../src/board/reducer.js';
import type { BoardOp } from '../../../src/board/schema.js';
import type { Role } from '../../../src/domain/enums.js';
import { useEffect, useRef } from 'react';
import { PinIcon } from '../ui/icons.js';
import type { SyncView } from './sync.js';

const newPageId = () => `pg-${Math.random().toString(36).slice(2, 12)}`;

/**
 * Page tabs. Everyone can add and rename pages (double-click or F2); a teacher can also delete
 * pages and pin one (everyone is moved to it, students cannot leave it).
 * The server enforces the same rules (src/board/apply.ts; both sides apply operations with src/board/reducer.ts).
 *
 * Only the tabs scroll sideways when there are more than fit: `+` and the pin stay on screen,
 * and the current tab is scrolled into view whenever it changes.
 */
export function PageBar(props: { view: SyncView; role: Role; locked: boolean; goTo: (id: string) => void; submit: (op: BoardOp) => void }) {
  const { view, role } = props;
  const teacher = role === 'teacher';
  const rename = (id: string, name: string) => {
    const next = window.prompt('Page name', name)?.trim();
    if (next && next !== name) props.submit({ type: 'page.rename', page_id: id, name: next.slice(0, 60) });
  };
  const tabs = useRef<HTMLDivElement>(null);
  useEffect(() => {
    tabs.current?.querySelector('.page-tab-wrap.current')?.scrollIntoView({ block: 'nearest', inline: 'nearest' });
  }, [view.page, view.pages.length]);
  return (
    <nav className="pagebar" aria-label="Pages">
      <div className="page-tabs" ref={tabs}>
        {view.pages.map((p, i) => (
          <span key={p.id} className={`page-tab-wrap${p.id === view.page ? ' current' : ''}`}>
            <button
              className={`page-tab${p.id === view.page ? ' current' : ''}${p.id === view.pinned ? ' pinned' : ''}`}
              aria-current={p.id === view.page ? 'page' : undefined}
              disabled={props.locked && p.id !== view.pinned}
              onClick={() => props.goTo(p.id)}
              onDoubleClick={() => rename(p.id, p.name)}
              // F2 renames, as in a file manager: the keyboard's double-click
              onKeyDown={(e) => e.key === 'F2' && rename(p.id, p.name)}
              title={p.id === view.pinned ? 'Pinned by the teacher' : 'Double-click or F2 to rename'}
              data-testid={`page-tab-${i}`}
            >
              {p.id === view.pinned && <PinIcon title="pinned" />}
              {p.name}
            </button>
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
