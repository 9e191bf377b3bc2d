// The audit trail: who did what, from where, to which tenant and object, and how it ended. Newest
// first; filters (tenant, actor, action) live in the URL; "Load more" follows the API's cursor.
// Admins see every record; others the records of their tenants (logins concern no tenant, so only
// admins see them).

import { useCallback, useEffect, useState } from 'react';
import type { FormEvent } from 'react';
import { AUDIT_ACTIONS } from '../api/types';
import { useAccess, useSession } from '../auth/session';
import { LoadMore } from '../components/LoadMore';
import { ErrorBanner, Loading, StateBadge } from '../components/Status';
import { SelectField } from '../components/SelectField';
import { TenantSelect } from '../components/TenantSelect';
import { Time } from '../components/Time';
import { useCursorList } from '../useCursorList';
import { useFilters } from '../useFilters';
import { usePolling } from '../usePolling';

export const AUDIT_PAGE = 50;

export function AuditScreen() {
  const { api } = useSession();
  const { can } = useAccess();
  const filters = useFilters();
  const tenantId = filters.get('tenantId');
  const actor = filters.get('actor');
  const action = filters.get('action');
  const tenants = usePolling((_s) => api.listTenants(), [api], null);
  const [actorDraft, setActorDraft] = useState(actor);
  const load = useCallback(
    (cursor: string, signal: AbortSignal) => api.listAudit({ tenantId, actor, action, cursor: cursor || undefined, limit: AUDIT_PAGE }, signal),
    [api, tenantId, actor, action],
  );
  const trail = useCursorList(load);

  useEffect(() => setActorDraft(actor), [actor]);

  function setFilter(key: string, value: string) {
    filters.set({ [key]: value });
  }

  function applyActor(e: FormEvent) {
    e.preventDefault();
    setFilter('actor', actorDraft.trim());
  }

  const filtered = !!(tenantId || actor || action);

  return (
    <section>
      <div className="page-head">
        <h1>Audit trail</h1>
        <span className="spacer" />
        <button type="button" className="btn btn-small" onClick={trail.reload} disabled={trail.loading}>
          Refresh
        </button>
      </div>
      <form className="filters" role="group" aria-label="Filters" onSubmit={applyActor}>
        <TenantSelect id="audit-tenant" value={tenantId} tenants={tenants.data?.items} allLabel={can('admin') ? 'All tenants' : 'All my tenants'} onChange={(v) => setFilter('tenantId', v)} />
        <div className="field">
          <label htmlFor="audit-actor">Actor (email)</label>
          <input
            id="audit-actor"
            type="search"
            value={actorDraft}
            onChange={(e) => setActorDraft(e.target.value)}
            onBlur={() => actorDraft.trim() !== actor && setFilter('actor', actorDraft.trim())}
            placeholder="exact email"
            autoComplete="off"
          />
        </div>
        <SelectField id="audit-action" label="Action" value={action} choices={AUDIT_ACTIONS} allLabel="All actions" onChange={(v) => setFilter('action', v)} />
        <button type="submit" className="sr-only" tabIndex={-1}>
          Apply filters
        </button>
      </form>
      <ErrorBanner error={trail.error} onRetry={trail.retry} />
      {trail.loading && trail.items.length === 0 ? (
        <Loading label="Loading the audit trail…" />
      ) : trail.items.length === 0 && !trail.error ? (
        <p className="empty">{filtered ? 'No entries match these filters.' : 'No entries yet.'}</p>
      ) : trail.items.length > 0 ? (
        <>
          <div className="table-wrap">
            <table className="table audit">
              <caption className="sr-only">Audit entries</caption>
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Action</th>
                  <th scope="col">Tenant</th>
                  <th scope="col">Target</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">Source</th>
                </tr>
              </thead>
              <tbody>
                {trail.items.map((e) => (
                  <tr key={e.id} data-audit-id={e.id} data-action={e.action}>
                    <td>
                      <Time value={e.at} />
                    </td>
                    <td>
                      {e.actor || <span className="muted">unknown</span>}
                      {(e.actorRole || e.tokenId) && (
                        <div className="muted small">
                          {e.actorRole}
                          {e.tokenId && <span className="mono"> · token {e.tokenId}</span>}
                        </div>
                      )}
                    </td>
                    <td className="mono">{e.action}</td>
                    <td>{e.tenantId || <span className="muted">—</span>}</td>
                    <td className="mono break">{e.target || <span className="muted">—</span>}</td>
                    <td>
                      <StateBadge state={e.outcome} />
                      <div className="muted small">
                        {e.status}
                        {e.detail && ` · ${e.detail}`}
                      </div>
                    </td>
                    <td className="mono">{e.source}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <LoadMore list={trail} noun={['entry', 'entries']} />
        </>
      ) : null}
    </section>
  );
}
