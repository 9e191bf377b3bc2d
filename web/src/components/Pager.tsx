// Keyset paging, as the API pages: forward by the cursor each page hands out, back along the
// cursors already followed. The cursors live in the history entry's state, so Back from a detail
// page and a reload return to the same page; a new filter or sort starts at the first.

import { useLocation, useNavigate } from 'react-router';

export interface CursorTrail {
  /** The cursor of the page shown ('' for the first). */
  cursor: string;
  /** 1-based number of the page shown. */
  page: number;
  next: (cursor: string) => void;
  previous: () => void;
  first: () => void;
}

/** The trail of cursors for the list whose filter and sort `key` names. */
export function useCursorTrail(key: string): CursorTrail {
  const location = useLocation();
  const navigate = useNavigate();
  const st = (location.state ?? {}) as { pages?: { key: string; cursors: string[] } };
  const cursors = st.pages?.key === key && Array.isArray(st.pages.cursors) ? st.pages.cursors : [];
  const go = (next: string[]) => navigate({ pathname: location.pathname, search: location.search }, { replace: true, state: { ...st, pages: { key, cursors: next } } });
  return {
    cursor: cursors[cursors.length - 1] ?? '',
    page: cursors.length + 1,
    next: (c) => go([...cursors, c]),
    previous: () => go(cursors.slice(0, -1)),
    first: () => go([]),
  };
}

export function Pager({ trail, shown, pageSize, total, nextCursor, busy }: { trail: CursorTrail; shown: number; pageSize: number; total?: number; nextCursor: string; busy?: boolean }) {
  const from = (trail.page - 1) * pageSize + 1;
  const to = from + shown - 1;
  return (
    <nav className="pager" aria-label="Pages">
      <span className="muted small" data-testid="page-range">
        {shown === 0 ? 'None' : `${from.toLocaleString()}–${to.toLocaleString()}`}
        {total !== undefined && ` of ${total.toLocaleString()}`}
        {` · page ${trail.page}`}
      </span>
      <span className="spacer" />
      <button type="button" className="btn btn-small" onClick={trail.first} disabled={trail.page === 1 || busy}>
        First
      </button>
      <button type="button" className="btn btn-small" onClick={trail.previous} disabled={trail.page === 1 || busy}>
        Previous
      </button>
      <button type="button" className="btn btn-small" onClick={() => trail.next(nextCursor)} disabled={!nextCursor || busy}>
        Next
      </button>
    </nav>
  );
}
