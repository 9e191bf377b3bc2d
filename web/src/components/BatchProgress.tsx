// A batch of commands (one start or stop sent to many sensors), polled every second until every
// command is settled: acknowledged or refused by its sensor, failed, or expired. A command is
// pending until the command stream stores it (accepted) or it provably cannot be (failed); the
// sensors' reports (acknowledged, refused) then come in as they fetch their commands, so the card
// keeps following an accepted batch until each sensor answered or its command expired.

import { useEffect, useState } from 'react';
import type { BatchProgress as Progress } from '../api/types';
import { useSession } from '../auth/session';
import { usePolling } from '../usePolling';
import { ErrorBanner } from './Status';

export const BATCH_POLL_MS = 1000;

/** No command waits for the stream any more (the API's done). */
export function batchDone(p: Progress | undefined): boolean {
  return !!p && (p.done ?? p.pending === 0);
}

/** Every command has its end: acknowledged or refused by the sensor, failed, or expired. */
export function batchSettled(p: Progress | undefined): boolean {
  return !!p && batchDone(p) && p.acknowledged + (p.refused ?? 0) + p.failed + (p.expired ?? 0) >= p.total;
}

function pct(n: number, total: number): string {
  return total > 0 ? `${((100 * n) / total).toFixed(2)}%` : '0%';
}

export function BatchProgressBar({ batchId, action, onDismiss }: { batchId: string; action: string; onDismiss: () => void }) {
  const { api } = useSession();
  const [over, setOver] = useState(false);
  const progress = usePolling((signal) => api.batchProgress(batchId, signal), [api, batchId], over ? null : BATCH_POLL_MS);
  const p = progress.data;
  const done = batchSettled(p);
  useEffect(() => setOver(done), [done]);
  // Pending, accepted, failed and expired add up to the total; acknowledged are among the accepted.
  const finished = p ? Math.max(0, p.total - p.pending) : 0;
  const acked = p ? Math.min(p.acknowledged, p.accepted) : 0;
  const lost = p ? p.failed + (p.expired ?? 0) : 0;
  const waiting = p ? Math.max(0, p.accepted - p.acknowledged - (p.refused ?? 0)) : 0;
  return (
    <div className="card batch" aria-labelledby={`batch-${batchId}`} data-testid="batch" data-done={done ? 'true' : 'false'} data-sent={batchDone(p) ? 'true' : 'false'}>
      <div className="batch-head">
        <h2 id={`batch-${batchId}`}>
          {action === 'start' ? 'Start' : action === 'stop' ? 'Stop' : action} sent to {p ? p.total.toLocaleString() : '…'} {p?.total === 1 ? 'sensor' : 'sensors'}
        </h2>
        <span className="spacer" />
        <button type="button" className="btn btn-small" onClick={onDismiss}>
          {done ? 'Done' : 'Hide'}
        </button>
      </div>
      {p && (
        <>
          <div
            className="progress"
            role="progressbar"
            aria-label="Batch progress"
            aria-valuemin={0}
            aria-valuemax={p.total}
            aria-valuenow={finished}
            aria-valuetext={`${finished.toLocaleString()} of ${p.total.toLocaleString()} sent`}
          >
            <span className="progress-acked" style={{ width: pct(acked, p.total) }} />
            <span className="progress-accepted" style={{ width: pct(p.accepted - acked, p.total) }} />
            <span className="progress-failed" style={{ width: pct(lost, p.total) }} />
          </div>
          <p className="small batch-counts" role="status">
            <span data-count="accepted">{p.accepted.toLocaleString()} accepted</span>
            <span data-count="acknowledged">{p.acknowledged.toLocaleString()} acknowledged by the sensor</span>
            <span data-count="failed">{p.failed.toLocaleString()} failed</span>
            {p.refused ? <span data-count="refused">{p.refused.toLocaleString()} refused by the sensor</span> : null}
            {p.expired ? <span data-count="expired">{p.expired.toLocaleString()} expired</span> : null}
            <span data-count="pending">{p.pending.toLocaleString()} pending</span>
            {!done && batchDone(p) && waiting > 0 ? <span data-count="waiting">{waiting.toLocaleString()} waiting for their sensor</span> : null}
            {p.skippedRevoked || p.skippedNotEnrolled ? (
              <span data-count="skipped" className="muted">
                skipped (no command): {p.skippedRevoked ?? 0} revoked, {p.skippedNotEnrolled ?? 0} never enrolled
              </span>
            ) : null}
            <span className="muted">batch {batchId}</span>
            {done && <strong>{lost > 0 || p.refused ? 'Finished: not every sensor applied it.' : 'Finished.'}</strong>}
          </p>
        </>
      )}
      <ErrorBanner error={progress.error} onRetry={progress.reload} />
    </div>
  );
}
