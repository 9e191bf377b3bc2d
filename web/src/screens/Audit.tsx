// The audit trail: who did what, from where, to which tenant and object, and how it ended. Newest
// first; filters (tenant, actor, action) live in the URL; "Load more" follows the API's cursor.
// Admins see every record; others the records of their tenants (logins concern no tenant, so only
// admins see them).

import { useCallback, useEffect, useRef, useState } from 'react';
import type { FormEvent } from 'react';
import { useSearchParams } from 'react-router';
import { AUDIT_ACTIONS } from '../api/types';
import type { AuditEntry } from '../api/types';
import { useAccess, useSession } from '../auth/session';
import { ErrorBanner, Loading, StateBadge } from '../components/Status';
import { Time } from '../components/Time';
import { usePolling } from '../usePolling';

export const AUDIT_PAGE = 50;

interface Trail {
  items: AuditEntry[];
  next: string;
  loading: boolean;
  error: unknown;
}

export function AuditScreen() {
  const { api } = useSession();
  const { can } = useAccess();
  const [params, setParams] = useSearchParams();
  const tenantId = params.get('tenantId') ?? '';
  const actor = params.get('actor') ?? '';
  const action = params.get('action') ?? '';
  const tenants = usePolling((_s) => api.listTenants(), [api], null);
  const [trail, setTrail] = useState<Trail>({ items: [], next: '', loading: true, error: null });
  const [actorDraft, setActorDraft] = useState(actor);
  const ctrl = useRef<AbortController | null>(null);

  const load = useCallback(
    async (cursor: string) => {
      ctrl.current?.abort();
      const c = new AbortController();
      ctrl.current = c;
      setTrail((t) => ({ ...(cursor ? t : { items: [], next: '' }), loading: true, error: null }));
      try {
        const page = await api.listAudit({ tenantId, actor, action, cursor: cursor || undefined, limit: AUDIT_PAGE }, c.signal);
        if (c.signal.aborted) return;
        setTrail((t) => ({ items: cursor ? [...t.items, ...page.items] : page.items, next: page.nextCursor ?? '', loading: false, error: null }));
      } catch (err) {
        if (c.signal.aborted) return;
        setTrail((t) => ({ ...t, loading: false, error: err }));
      }
    },
    [api, tenantId, actor, action],
  );

  useEffect(() => {
    load('');
    return () => ctrl.current?.abort();
  }, [load]);

  useEffect(() => setActorDraft(actor), [actor]);

  function setFilter(key: string, value: string) {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    setParams(next, { replace: true });
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
        <button type="button" className="btn btn-small" onClick={() => load('')} disabled={trail.loading}>
          Refresh
        </button>
      </div>
      <form className="filters" role="group" aria-label="Filters" onSubmit={applyActor}>
        <div className="field">
          <label htmlFor="audit-tenant">Tenant</label>
          <select id="audit-tenant" value={tenantId} onChange={(e) => setFilter('tenantId', e.target.value)}>
            <option value="">{can('admin') ? 'All tenants' : 'All my tenants'}</option>
            {tenants.data?.items.map((t) => (
              <option key={t.id} value={t.id}>
                {t.name} ({t.id})
              </option>
            ))}
            {tenantId && !tenants.data?.items.some((t) => t.id === tenantId) && <option value={tenantId}>{tenantId}</option>}
          </select>
        </div>
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
        <div className="field">
          <label htmlFor="audit-action">Action</label>
          <select id="audit-action" value={action} onChange={(e) => setFilter('action', e.target.value)}>
            <option value="">All actions</option>
            {AUDIT_ACTIONS.map((a) => (
              <option key={a} value={a}>
                {a}
              </option>
            ))}
            {action && !(AUDIT_ACTIONS as readonly string[]).includes(action) && <option value={action}>{action}</option>}
          </select>
        </div>
        <button type="submit" className="sr-only" tabIndex={-1}>
          Apply filters
        </button>
      </form>
      <ErrorBanner error={trail.error} onRetry={() => load(trail.items.length ? trail.next : '')} />
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
          <div className="load-more">
            {trail.next ? (
              <button type="button" className="btn" onClick={() => load(trail.next)} disabled={trail.loading}>
                {trail.loading ? 'Loading…' : 'Load more'}
              </button>
            ) : (
              <span className="muted small">
                {trail.items.length} {trail.items.length === 1 ? 'entry' : 'entries'}; that is all.
              </span>
            )}
          </div>
        </>
      ) : null}
    </section>
  );
}
