import { useEffect, useSyncExternalStore } from 'react';
import type { Together } from './Together.js';

/**
 * Following on the board (the "Following Anna" badge and its stop button are the editor's own):
 * the teacher's "Everyone follow me" and who follows them; a student who stepped out of the
 * teacher's lead gets "Back to the teacher". Esc stops following.
 */
export function FollowBar({ together, present }: { together: Together; present: (id: string) => boolean }) {
  const s = useSyncExternalStore(together.subscribe, together.state);
  const me = together.me;
  useEffect(() => {
    if (!s.following) return;
    const esc = (e: KeyboardEvent) => {
      if (e.key === 'Escape') together.follow(null);
    };
    // captured: the editor handles Escape itself and stops it there
    window.addEventListener('keydown', esc, true);
    return () => window.removeEventListener('keydown', esc, true);
  }, [s.following, together]);

  const followers = together.followersOf(me.id);
  const leading = s.lead === me.id;
  const stepOut = me.role === 'student' && s.lead && s.following !== s.lead && present(s.lead);
  if (me.role !== 'teacher' && !stepOut) return null;
  return (
    <div className="follow-bar" data-testid="follow-bar">
      {me.role === 'teacher' && (
        <button type="button" className={leading ? 'active' : ''} aria-pressed={leading} onClick={() => together.setLead(!leading)}>
          {leading ? 'Stop: everyone follows me' : 'Everyone follow me'}
        </button>
      )}
      {me.role === 'teacher' && followers.length > 0 && (
        <span className="followers" data-testid="followers">
          Following you: {followers.map((id) => together.nameOf(id)).join(', ')}
        </span>
      )}
      {stepOut && (
        <button type="button" onClick={() => together.follow(s.lead)}>
          Back to the teacher
        </button>
      )}
    </div>
  );
}
