// Loads data now and again every `intervalMs`, keeping the last good value when a refresh fails.

import { useCallback, useEffect, useRef, useState } from 'react';

export interface Polled<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  updatedAt: number | null;
  reload: () => void;
}

export function usePolling<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[], intervalMs: number | null): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const [updatedAt, setUpdatedAt] = useState<number | null>(null);
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  const updatedAtRef = useRef<number | null>(null);
  loadRef.current = load;

  useEffect(() => {
    setData(undefined);
    setLoading(true);
    setError(null);
  }, deps);

  useEffect(() => {
    const ctrl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      // A hidden tab skips its refreshes and catches up on the next tick after it is shown.
      if (updatedAtRef.current !== null && intervalMs && document.visibilityState === 'hidden') {
        timer = setTimeout(run, intervalMs);
        return;
      }
      try {
        const v = await loadRef.current(ctrl.signal);
        if (ctrl.signal.aborted) return;
        setData(v);
        setError(null);
        updatedAtRef.current = Date.now();
        setUpdatedAt(updatedAtRef.current);
      } catch (err) {
        if (ctrl.signal.aborted) return;
        setError(err);
      } finally {
        if (!ctrl.signal.aborted) {
          setLoading(false);
          if (intervalMs) timer = setTimeout(run, intervalMs);
        }
      }
    };
    run();
    return () => {
      ctrl.abort();
      clearTimeout(timer);
    };
  }, [...deps, tick, intervalMs]);

  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, updatedAt, reload };
}
