// Loads data now and again every `intervalMs`, keeping the last good value when a refresh fails.
// A hidden tab does not poll at all: the timer stops while the page is hidden and the data is
// loaded again as soon as it is shown.

import { useCallback, useEffect, useRef, useState } from 'react';

export interface Polled<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  updatedAt: number | null;
  reload: () => void;
}

export interface PollingOptions {
  /** Keep showing the previous data while data for new deps loads (a list that changes page or filter). */
  keepData?: boolean;
}

export function usePolling<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[], intervalMs: number | null, opts: PollingOptions = {}): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const [updatedAt, setUpdatedAt] = useState<number | null>(null);
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const keepData = !!opts.keepData;

  useEffect(() => {
    if (!keepData) setData(undefined);
    setLoading(true);
    setError(null);
  }, deps);

  useEffect(() => {
    const ctrl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let paused = false;
    const schedule = () => {
      if (!intervalMs || ctrl.signal.aborted) return;
      if (document.visibilityState === 'hidden') paused = true;
      else timer = setTimeout(run, intervalMs);
    };
    const run = async () => {
      try {
        const v = await loadRef.current(ctrl.signal);
        if (ctrl.signal.aborted) return;
        setData(v);
        setError(null);
        setUpdatedAt(Date.now());
      } catch (err) {
        if (ctrl.signal.aborted) return;
        setError(err);
      } finally {
        if (!ctrl.signal.aborted) {
          setLoading(false);
          schedule();
        }
      }
    };
    const onVisibility = () => {
      if (paused && document.visibilityState === 'visible') {
        paused = false;
        run();
      }
    };
    document.addEventListener('visibilitychange', onVisibility);
    run();
    return () => {
      ctrl.abort();
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, [...deps, tick, intervalMs]);

  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, updatedAt, reload };
}
