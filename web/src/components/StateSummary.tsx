// How many sensors are in each state, as buttons that filter the list by that state.

import { SENSOR_STATES } from '../api/types';
import type { SensorSummary } from '../api/types';

export function StateSummary({ summary, active, onPick }: { summary: SensorSummary | undefined; active: string; onPick: (state: string) => void }) {
  if (!summary) return null;
  // The known states in their usual order, then any the API adds, each only when it has sensors.
  const extra = Object.keys(summary.byState).filter((s) => !(SENSOR_STATES as readonly string[]).includes(s));
  const states = [...SENSOR_STATES, ...extra].filter((s) => (summary.byState[s] ?? 0) > 0 || s === active);
  return (
    <ul className="summary" aria-label="Sensors by state" data-testid="state-summary">
      <li>
        <button type="button" className="summary-item" aria-pressed={active === ''} onClick={() => onPick('')}>
          <span className="summary-count">{summary.total.toLocaleString()}</span> all
        </button>
      </li>
      {states.map((s) => (
        <li key={s}>
          <button type="button" className={`summary-item summary-${s}`} aria-pressed={active === s} onClick={() => onPick(active === s ? '' : s)} data-state={s}>
            <span className="summary-count">{(summary.byState[s] ?? 0).toLocaleString()}</span> {s}
          </button>
        </li>
      ))}
    </ul>
  );
}
