// Filters kept in the URL's query, so a filtered view can be linked and survives a reload. Changes
// replace the history entry: Back leaves the screen instead of undoing one filter at a time.

import { useCallback } from 'react';
import { useSearchParams } from 'react-router';

export function useFilters(): { params: URLSearchParams; get: (key: string) => string; set: (changes: Record<string, string>, state?: unknown) => void } {
  const [params, setParams] = useSearchParams();
  const get = useCallback((key: string) => params.get(key) ?? '', [params]);
  const set = useCallback(
    (changes: Record<string, string>, state?: unknown) => {
      setParams(
        (prev) => {
          const next = new URLSearchParams(prev);
          for (const [k, v] of Object.entries(changes)) {
            if (v) next.set(k, v);
            else next.delete(k);
          }
          return next;
        },
        { replace: true, state },
      );
    },
    [setParams],
  );
  return { params, get, set };
}
