// What the operator is looking at on the Analytics screen, shared with the chat so that a question
// carries its context: the time range, sensor, top lists and free text.

import { createContext, useContext, useEffect, useState } from 'react';
import type { ReactNode } from 'react';
import type { AnalyticsSnapshot, Overview } from '../api/types';

/** The server refuses snapshots over 16 KiB of JSON; stay well below. */
export const SNAPSHOT_LIMIT_BYTES = 16 * 1024;
const TOP_N = 10;

export interface CurrentView {
  tenantId: string;
  snapshot: AnalyticsSnapshot;
}

interface Ctx {
  view: CurrentView | null;
  setView: (v: CurrentView | null) => void;
}

const SnapshotContext = createContext<Ctx>({ view: null, setView: () => {} });

export function SnapshotProvider({ children }: { children: ReactNode }) {
  const [view, setView] = useState<CurrentView | null>(null);
  return <SnapshotContext.Provider value={{ view, setView }}>{children}</SnapshotContext.Provider>;
}

/** The view the Analytics screen published, or null elsewhere. */
export function useCurrentView(): CurrentView | null {
  return useContext(SnapshotContext).view;
}

/** Publishes the screen's view while it is shown. */
export function usePublishView(view: CurrentView | null) {
  const { setView } = useContext(SnapshotContext);
  const key = view ? JSON.stringify(view) : '';
  useEffect(() => {
    setView(view);
    return () => setView(null);
    // The serialised view is the dependency: a new object with the same content changes nothing.
  }, [key, setView]);
}

/** Builds the snapshot of an overview: top lists cut to ten entries each. */
export function snapshotOf(ov: Overview, sensorId?: string): AnalyticsSnapshot {
  const s: AnalyticsSnapshot = {
    from: ov.from,
    to: ov.to,
    topSources: ov.topSources.slice(0, TOP_N),
    topDestinations: ov.topDestinations.slice(0, TOP_N),
    topSignatures: ov.topSignatures.slice(0, TOP_N),
    cves: ov.cves.slice(0, TOP_N),
  };
  if (sensorId) s.sensorId = sensorId;
  return s;
}

/** Adds the operator's free text and keeps the JSON under the server's limit, dropping list tails first. */
export function withText(s: AnalyticsSnapshot, text: string): AnalyticsSnapshot {
  const out: AnalyticsSnapshot = { ...s };
  if (text.trim()) out.text = text.trim().slice(0, 4000);
  const size = () => new TextEncoder().encode(JSON.stringify(out)).length;
  const lists = ['topSignatures', 'topDestinations', 'topSources', 'cves'] as const;
  while (size() > SNAPSHOT_LIMIT_BYTES - 512) {
    const longest = lists.reduce((a, b) => ((out[a]?.length ?? 0) >= (out[b]?.length ?? 0) ? a : b));
    const list = out[longest];
    if (!list || list.length === 0) break;
    out[longest] = list.slice(0, -1) as never;
  }
  return out;
}
