// Past command batches, newest first (GET /api/commands/batches, tenant-scoped by the API), each
// with where its commands stand; a batch still moving is followed in its progress card.

import { useCallback, useState } from 'react';
import { useSession } from '../auth/session';
import { BatchProgressBar, batchSettled } from '../components/BatchProgress';
import { LoadMore } from '../components/LoadMore';
import { ErrorBanner, Loading } from '../components/Status';
import { Time } from '../components/Time';
import { useCursorList } from '../useCursorList';

export const BATCH_PAGE = 25;

export function BatchesScreen() {
  const { api } = useSession();
  const load = useCallback((cursor: string, signal: AbortSignal) => api.listBatches({ limit: BATCH_PAGE, cursor: cursor || undefined }, signal), [api]);
  const list = useCursorList(load);
  const [followed, setFollowed] = useState<{ batchId: string; action: string } | null>(null);

  return (
    <section>
      <div className="page-head">
        <h1>Command batches</h1>
        <span className="spacer" />
        <button type="button" className="btn btn-small" onClick={list.reload}>
          Refresh
        </button>
      </div>
      {followed && <BatchProgressBar key={followed.batchId} batchId={followed.batchId} action={followed.action} onDismiss={() => setFollowed(null)} />}
      <ErrorBanner error={list.error} onRetry={list.retry} />
      {list.loading && list.items.length === 0 ? (
        <Loading label="Loading batches…" />
      ) : list.items.length === 0 && !list.error ? (
        <p className="empty">No batch yet. Select sensors on the Sensors screen and start or stop them together.</p>
      ) : list.items.length > 0 ? (
        <>
          <div className="table-wrap table-cards-wrap">
            <table className="table table-cards">
              <caption className="sr-only">Command batches, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Created</th>
                  <th scope="col">Action</th>
                  <th scope="col">By</th>
                  <th scope="col">Tenants</th>
                  <th scope="col">Commands</th>
                  <th scope="col">Outcome</th>
                </tr>
              </thead>
              <tbody>
                {list.items.map((b) => (
                  <tr key={b.batchId} data-batch-id={b.batchId}>
                    <td className="card-title">
                      <Time value={b.createdAt} />
                      <div className="muted small mono break">{b.batchId}</div>
                    </td>
                    <td data-label="Action">{b.action}</td>
                    <td data-label="By" className="break">
                      {b.createdBy}
                    </td>
                    <td data-label="Tenants" className="break">
                      {b.tenantIds.join(', ') || <span className="muted">—</span>}
                    </td>
                    <td data-label="Commands">
                      {b.total.toLocaleString()}
                      {(b.skippedRevoked ?? 0) + (b.skippedNotEnrolled ?? 0) > 0 && (
                        <div className="muted small">
                          {((b.skippedRevoked ?? 0) + (b.skippedNotEnrolled ?? 0)).toLocaleString()} skipped (revoked or never enrolled)
                        </div>
                      )}
                    </td>
                    <td data-label="Outcome" className="small" data-testid="batch-outcome">
                      {b.acknowledged.toLocaleString()} acknowledged · {(b.refused ?? 0).toLocaleString()} refused · {b.failed.toLocaleString()} failed ·{' '}
                      {(b.expired ?? 0).toLocaleString()} expired · {b.pending.toLocaleString()} pending
                      {!batchSettled(b) && (
                        <div>
                          <button type="button" className="link" onClick={() => setFollowed({ batchId: b.batchId, action: b.action })}>
                            Follow
                          </button>
                        </div>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <LoadMore list={list} noun={['batch', 'batches']} />
        </>
      ) : null}
    </section>
  );
}
