// A list the API hands out in pages with a cursor, grown by "Load more": the audit trail, a
// sensor's command history. A new load function (new filters) starts again from the first page;
// a failed page keeps what was loaded.

import { useCallback, useEffect, useRef, useState } from 'react';

export interface CursorPage<T> {
  items: T[];
  nextCursor?: string | null;
}

export interface CursorList<T> {
  items: T[];
  /** The cursor of the next page; empty on the last one. */
  next: string;
  loading: boolean;
  error: unknown;
  /** Appends the next page. */
  more: () => void;
  /** Starts again from the first page. */
  reload: () => void;
  /** Retries what failed: the next page when some are loaded, else the first. */
  retry: () => void;
}

export function useCursorList<T>(load: (cursor: string, signal: AbortSignal) => Promise<CursorPage<T>>): CursorList<T> {
  const [state, setState] = useState<{ items: T[]; next: string; loading: boolean; error: unknown }>({ items: [], next: '', loading: true, error: null });
  const ctrl = useRef<AbortController | null>(null);
  const nextRef = useRef('');
  nextRef.current = state.next;

  const fetchPage = useCallback(
    async (cursor: string) => {
      ctrl.current?.abort();
      const c = new AbortController();
      ctrl.current = c;
      setState((s) => ({ ...(cursor ? s : { items: [], next: '' }), loading: true, error: null }));
      try {
        const page = await load(cursor, c.signal);
        if (c.signal.aborted) return;
        setState((s) => ({ items: cursor ? [...s.items, ...page.items] : page.items, next: page.nextCursor ?? '', loading: false, error: null }));
      } catch (err) {
        if (c.signal.aborted) return;
        setState((s) => ({ ...s, loading: false, error: err }));
      }
    },
    [load],
  );

  useEffect(() => {
    fetchPage('');
    return () => ctrl.current?.abort();
  }, [fetchPage]);

  const more = useCallback(() => fetchPage(nextRef.current), [fetchPage]);
  const reload = useCallback(() => fetchPage(''), [fetchPage]);
  const hasItems = state.items.length > 0;
  const retry = useCallback(() => fetchPage(hasItems ? nextRef.current : ''), [fetchPage, hasItems]);
  return { ...state, more, reload, retry };
}
