// Filters kept in the URL's query, so a filtered view can be linked and survives a reload. Changes
// replace the history entry: Back leaves the screen instead of undoing one filter at a time.

import { useCallback, useEffect, useRef } from 'react';
import { useSearchParams } from 'react-router';

export function useFilters(): { params: URLSearchParams; get: (key: string) => string; set: (changes: Record<string, string>, state?: unknown) => void } {
  const [params, setParams] = useSearchParams();
  // The query last asked for, until the router renders it. Two changes before the next render
  // (clear the actor, then pick an action) must build on each other; useSearchParams' own
  // updater is handed the params of the last render, so the second change undid the first on a
  // busy machine.
  const pending = useRef<URLSearchParams | null>(null);
  useEffect(() => {
    pending.current = null;
  }, [params]);
  const get = useCallback((key: string) => params.get(key) ?? '', [params]);
  const set = useCallback(
    (changes: Record<string, string>, state?: unknown) => {
      const next = new URLSearchParams(pending.current ?? params);
      for (const [k, v] of Object.entries(changes)) {
        if (v) next.set(k, v);
        else next.delete(k);
      }
      pending.current = next;
      setParams(next, { replace: true, state });
    },
    [params, setParams],
  );
  return { params, get, set };
}
