import type { CursorList } from '../useCursorList';

/** The foot of a cursor list: "Load more" while the API has more, else how many there are. */
export function LoadMore({ list, noun }: { list: CursorList<unknown>; noun: [string, string] }) {
  return (
    <div className="load-more">
      {list.next ? (
        <button type="button" className="btn" onClick={list.more} disabled={list.loading}>
          {list.loading ? 'Loading…' : 'Load more'}
        </button>
      ) : (
        <span className="muted small">
          {list.items.length} {list.items.length === 1 ? noun[0] : noun[1]}; that is all.
        </span>
      )}
    </div>
  );
}
