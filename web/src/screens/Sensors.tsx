// The fleet, one page at a time: the API filters (tenant, state, search), sorts and pages; the
// console polls only the page shown and the per-state summary, and not at all while the tab is
// hidden. Operators select sensors (or every sensor matching the filter) and start or stop them
// as one batch, whose progress stays on screen.

import { useEffect, useState } from 'react';
import { Link } from 'react-router';
import type { ApiClient } from '../api/client';
import { SENSOR_STATES } from '../api/types';
import type { CommandAction, Sensor, SensorFilter } from '../api/types';
import { useAccess, useSession } from '../auth/session';
import { BatchProgressBar } from '../components/BatchProgress';
import { ConfirmDialog } from '../components/Dialog';
import { Pager, useCursorTrail } from '../components/Pager';
import { SearchBox } from '../components/SearchBox';
import { SelectField } from '../components/SelectField';
import { SortHeader } from '../components/SortHeader';
import { StateSummary } from '../components/StateSummary';
import { ErrorBanner, Loading, StateBadge } from '../components/Status';
import { TenantSelect } from '../components/TenantSelect';
import { Time } from '../components/Time';
import { LabelChips, parseLabels } from '../labels';
import { useFilters } from '../useFilters';
import { usePolling } from '../usePolling';

export const POLL_MS = 3000;
export const PAGE_SIZES = [25, 50, 100, 200] as const;
export const DEFAULT_PAGE_SIZE = 50;
const DEFAULT_SORT = 'name';
const SORTS: { value: string; label: string }[] = [
  { value: 'name', label: 'Name, A to Z' },
  { value: '-name', label: 'Name, Z to A' },
  { value: 'state', label: 'State' },
  { value: '-lastSeen', label: 'Last seen, newest first' },
  { value: 'lastSeen', label: 'Last seen, oldest first' },
  { value: '-createdAt', label: 'Enrolled, newest first' },
  { value: 'createdAt', label: 'Enrolled, oldest first' },
];

/** Every sensor matching the filter, or the ones picked by hand. */
type Selection = { all: true } | { all: false; ids: Set<string> };
const NONE: Selection = { all: false, ids: new Set() };

/** The first page's query, from the screen's URL. */
export function listQuery(params: URLSearchParams): { tenantId: string; state: string; q: string; labels: Record<string, string>; labelText: string; sort: string; limit: number } {
  const limit = Number(params.get('limit'));
  const labelText = params.get('labels') ?? '';
  const parsed = parseLabels(labelText);
  return {
    tenantId: params.get('tenantId') ?? '',
    state: params.get('state') ?? '',
    q: params.get('q') ?? '',
    labels: 'labels' in parsed ? parsed.labels : {},
    labelText,
    sort: params.get('sort') || DEFAULT_SORT,
    limit: (PAGE_SIZES as readonly number[]).includes(limit) ? limit : DEFAULT_PAGE_SIZE,
  };
}

/** Asks for the list's first page and the summary while the session is still being checked. */
export function prefetchSensors(api: ApiClient, search: string) {
  api.prefetchSensors(listQuery(new URLSearchParams(search)));
}

/** A random idempotency key (crypto.randomUUID needs a secure context; the console may be served over plain HTTP). */
export function newIdempotencyKey(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** The request body's filter: only the parts set. */
export function filterOf(f: SensorFilter): SensorFilter {
  const out: SensorFilter = {};
  if (f.tenantId) out.tenantId = f.tenantId;
  if (f.state) out.state = f.state;
  if (f.q) out.q = f.q;
  if (f.labels && Object.keys(f.labels).length > 0) out.labels = f.labels;
  return out;
}

export function SensorsScreen() {
  const { api } = useSession();
  const { me, can } = useAccess();
  const filters = useFilters();
  const { tenantId, state, q, labels, labelText, sort, limit } = listQuery(filters.params);
  const labelError = 'error' in parseLabels(labelText) ? (parseLabels(labelText) as { error: string }).error : '';
  const labelKey = JSON.stringify(labels);
  const filterKey = JSON.stringify([tenantId, state, q, labelKey]);
  const trail = useCursorTrail(JSON.stringify([filterKey, sort, limit]));

  const tenants = usePolling((_s) => api.listTenants(), [api], null);
  const summary = usePolling((signal) => api.sensorSummary(tenantId || undefined, signal), [api, tenantId], POLL_MS, { keepData: true });
  const sensors = usePolling(
    (signal) => api.listSensors({ tenantId, state, q, labels, sort, limit, cursor: trail.cursor || undefined }, signal),
    [api, tenantId, state, q, labelKey, sort, limit, trail.cursor],
    POLL_MS,
    { keepData: true },
  );

  // A cursor the API no longer takes (the operator's tenants changed since) starts over at page 1.
  const cursorRefused = trail.page > 1 && (sensors.error as { code?: string } | null)?.code === 'invalid_cursor';
  const { first } = trail;
  useEffect(() => {
    if (cursorRefused) first();
  }, [cursorRefused]);

  const [selection, setSelection] = useState<{ key: string; sel: Selection }>({ key: filterKey, sel: NONE });
  const sel = selection.key === filterKey ? selection.sel : NONE;
  const setSel = (s: Selection) => setSelection({ key: filterKey, sel: s });
  // The key makes a second Confirm after an unclear failure (the answer was lost) return the batch
  // already made instead of making another; a new dialog is a new request.
  const [confirming, setConfirming] = useState<{ action: CommandAction; key: string } | null>(null);
  const [batch, setBatch] = useState<{ batchId: string; action: CommandAction } | null>(null);

  // Bulk commands need the operator role: on the tenant filtered by, else on the sensors' tenants
  // (the list holds only tenants the principal sees, so the role decides).
  const mayBulk = tenantId ? can('operate', tenantId) : me.role === 'admin' || me.role === 'operator';
  const items = sensors.data?.items ?? [];
  const selectable = items.filter((s) => can('operate', s.tenantId));
  const nextCursor = sensors.data?.nextCursor ?? '';
  // Without a search, the summary says how many match; a search's count is not known in advance.
  const filtered = q || Object.keys(labels).length > 0;
  const matching = filtered || !summary.data ? undefined : state ? (summary.data.byState[state] ?? 0) : summary.data.total;
  const pageAllSelected = !sel.all && selectable.length > 0 && selectable.every((s) => sel.ids.has(s.id));
  const selectedCount = sel.all ? matching : sel.ids.size;
  const anySelected = sel.all || sel.ids.size > 0;

  function setFilter(changes: Record<string, string>) {
    filters.set(changes);
  }

  function toggle(s: Sensor) {
    const ids = new Set(sel.all ? [] : sel.ids);
    if (ids.has(s.id)) ids.delete(s.id);
    else ids.add(s.id);
    setSel({ all: false, ids });
  }

  function togglePage() {
    const ids = new Set(sel.all ? [] : sel.ids);
    for (const s of selectable) {
      if (pageAllSelected) ids.delete(s.id);
      else ids.add(s.id);
    }
    setSel({ all: false, ids });
  }

  function confirm(action: CommandAction) {
    setConfirming({ action, key: newIdempotencyKey() });
  }

  const bulkRequest = (action: CommandAction) => (sel.all ? { action, filter: filterOf({ tenantId, state, q, labels }) } : { action, sensorIds: [...sel.ids] });
  // The exact count, asked for when the dialog opens: how many get the command and why any are skipped.
  const [preview, setPreview] = useState<{ key: string; total: number; skippedRevoked: number; skippedNotEnrolled: number } | { key: string; error: unknown } | null>(null);
  const confirmKey = confirming?.key;
  useEffect(() => {
    if (!confirming) return;
    const ctl = new AbortController();
    api.previewBulkCommand(bulkRequest(confirming.action), ctl.signal).then(
      (p) => setPreview({ key: confirming.key, ...p }),
      (error) => !ctl.signal.aborted && setPreview({ key: confirming.key, error }),
    );
    return () => ctl.abort();
  }, [confirmKey]);
  const shown = preview && preview.key === confirmKey ? preview : null;
  const exact = shown && 'total' in shown ? shown : null;

  async function sendBulk(action: CommandAction, key: string) {
    const req = bulkRequest(action);
    const res = await api.sendBulkCommand(req, key);
    setBatch({ batchId: res.batchId, action });
    setSel(NONE);
    sensors.reload();
  }

  const what = sel.all ? (matching !== undefined ? `all ${matching.toLocaleString()} matching sensors` : 'all sensors matching this search') : `${sel.ids.size.toLocaleString()} ${sel.ids.size === 1 ? 'sensor' : 'sensors'}`;

  return (
    <section>
      <div className="page-head">
        <h1>Sensors</h1>
        <span className="spacer" />
        <span className="muted small" aria-live="off">
          {sensors.updatedAt ? `Live · updated ${new Date(sensors.updatedAt).toLocaleTimeString()}` : ''}
        </span>
      </div>
      <StateSummary summary={summary.data} active={state} onPick={(s) => setFilter({ state: s })} />
      <div className="filters" role="group" aria-label="Filters">
        <SearchBox id="filter-q" label="Search" value={q} placeholder="name, hostname or ID" onSearch={(v) => setFilter({ q: v })} />
        <SearchBox id="filter-labels" label="Labels" value={labelText} placeholder="site=ams role=edge" onSearch={(v) => setFilter({ labels: v.trim() })} />
        <TenantSelect id="filter-tenant" value={tenantId} tenants={tenants.data?.items} allLabel="All tenants" onChange={(v) => setFilter({ tenantId: v })} />
        <SelectField id="filter-state" label="State" value={state} choices={SENSOR_STATES} allLabel="All states" onChange={(v) => setFilter({ state: v })} />
        <SelectField id="sort" label="Sort by" value={sort} choices={SORTS} onChange={(v) => setFilter({ sort: v === DEFAULT_SORT ? '' : v })} />
      </div>
      {labelError && (
        <p className="small bad-text" role="alert">
          Labels filter not applied: {labelError}
        </p>
      )}
      {batch && <BatchProgressBar key={batch.batchId} batchId={batch.batchId} action={batch.action} onDismiss={() => setBatch(null)} />}
      {mayBulk && anySelected && (
        <div className="bulk" role="toolbar" aria-label="Bulk actions">
          <strong data-testid="selected-count">{selectedCount === undefined ? 'All matching' : selectedCount.toLocaleString()} selected</strong>
          <button type="button" className="btn btn-small btn-primary" onClick={() => confirm('start')}>
            Start
          </button>
          <button type="button" className="btn btn-small" onClick={() => confirm('stop')}>
            Stop
          </button>
          <button type="button" className="btn btn-small" onClick={() => setSel(NONE)}>
            Clear selection
          </button>
        </div>
      )}
      {mayBulk && (pageAllSelected || sel.all) && (nextCursor || trail.page > 1 || sel.all) && (
        <p className="select-all" role="status">
          {sel.all ? (
            <>
              All {matching !== undefined ? matching.toLocaleString() : ''} sensors matching {q || tenantId || state || filtered ? 'these filters' : 'in the fleet'} are selected.{' '}
              <button type="button" className="link" onClick={() => setSel(NONE)}>
                Clear selection
              </button>
            </>
          ) : (
            <>
              All {selectable.length} on this page are selected.{' '}
              <button type="button" className="link" onClick={() => setSel({ all: true })}>
                Select all {matching !== undefined ? `${matching.toLocaleString()} ` : ''}matching
              </button>
            </>
          )}
        </p>
      )}
      <ErrorBanner error={sensors.error ?? summary.error} onRetry={() => (summary.reload(), sensors.reload())} />
      {!sensors.data ? (
        sensors.loading ? <Loading label="Loading sensors…" /> : null
      ) : items.length === 0 && trail.page === 1 ? (
        <p className="empty">
          {tenantId || state || q || filtered ? 'No sensors match these filters.' : <>No sensors yet. Issue a claim code from a <Link to="/tenants">tenant</Link> and run the sensor agent with it.</>}
        </p>
      ) : (
        <>
          <div className="table-wrap table-cards-wrap">
            <table className="table table-cards" aria-busy={sensors.loading}>
              <caption className="sr-only">Sensors</caption>
              <thead>
                <tr>
                  {mayBulk && (
                    <th scope="col" className="check">
                      <label className="check-all">
                        <input
                          type="checkbox"
                          aria-label="Select all on this page"
                          checked={sel.all || pageAllSelected}
                          ref={(el) => {
                            if (el) el.indeterminate = !sel.all && !pageAllSelected && selectable.some((s) => sel.ids.has(s.id));
                          }}
                          disabled={sel.all || selectable.length === 0}
                          onChange={togglePage}
                        />
                        <span className="check-all-text" aria-hidden="true">
                          Select this page
                        </span>
                      </label>
                    </th>
                  )}
                  <SortHeader field="name" sort={sort} onSort={(s) => setFilter({ sort: s === DEFAULT_SORT ? '' : s })}>
                    Name
                  </SortHeader>
                  <th scope="col">Hostname</th>
                  <th scope="col">Tenant</th>
                  <th scope="col">Labels</th>
                  <SortHeader field="state" sort={sort} onSort={(s) => setFilter({ sort: s })}>
                    State
                  </SortHeader>
                  <th scope="col">Agent</th>
                  <SortHeader field="lastSeen" sort={sort} onSort={(s) => setFilter({ sort: s })}>
                    Last seen
                  </SortHeader>
                </tr>
              </thead>
              <tbody>
                {items.map((s) => (
                  <tr key={s.id} data-sensor-id={s.id}>
                    {mayBulk && (
                      <td className="check">
                        {can('operate', s.tenantId) && (
                          <input type="checkbox" aria-label={`Select ${s.name || s.id}`} checked={sel.all || sel.ids.has(s.id)} disabled={sel.all} onChange={() => toggle(s)} />
                        )}
                      </td>
                    )}
                    <td className="card-title">
                      <Link to={`/sensors/${encodeURIComponent(s.id)}`}>{s.name || s.id}</Link>
                      <div className="muted small mono break">{s.id}</div>
                    </td>
                    <td data-label="Hostname" className="break">
                      {s.hostname || <span className="muted">—</span>}
                    </td>
                    <td data-label="Tenant">
                      <Link to={`/tenants/${encodeURIComponent(s.tenantId)}`}>{s.tenantId}</Link>
                    </td>
                    <td data-label="Labels">
                      <LabelChips labels={s.labels} />
                    </td>
                    <td data-label="State">
                      <StateBadge state={s.state} />
                    </td>
                    <td data-label="Agent" className="mono">
                      {s.agentVersion || <span className="muted">—</span>}
                    </td>
                    <td data-label="Last seen">
                      <Time value={s.lastSeenAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <div className="pager-row">
            <Pager trail={trail} shown={items.length} pageSize={limit} total={matching} nextCursor={nextCursor} busy={sensors.loading} />
            <SelectField id="page-size" label="Per page" inline value={limit} choices={PAGE_SIZES} onChange={(v) => setFilter({ limit: Number(v) === DEFAULT_PAGE_SIZE ? '' : v })} />
          </div>
        </>
      )}
      {confirming && (
        <ConfirmDialog
          title={`${confirming.action === 'start' ? 'Start' : 'Stop'} ${what}?`}
          confirmLabel={`${confirming.action === 'start' ? 'Start' : 'Stop'} ${exact ? (exact.total === 1 ? '1 sensor' : `${exact.total.toLocaleString()} sensors`) : sel.all ? 'all matching' : selectedCount === 1 ? '1 sensor' : `${(selectedCount ?? 0).toLocaleString()} sensors`}`}
          danger={confirming.action === 'stop'}
          onClose={() => setConfirming(null)}
          onConfirm={() => sendBulk(confirming.action, confirming.key)}
        >
          <p>
            {confirming.action === 'start' ? 'Each sensor will be told to start capturing.' : 'Each sensor will stop capturing until it is started again.'} The commands go out as one batch; its
            progress shows here as the sensors answer.
          </p>
          <p data-testid="batch-preview" role="status">
            {exact ? (
              <>
                <strong>{exact.total.toLocaleString()}</strong> {exact.total === 1 ? 'sensor gets' : 'sensors get'} the command now.
                {exact.skippedRevoked + exact.skippedNotEnrolled > 0 &&
                  ` ${(exact.skippedRevoked + exact.skippedNotEnrolled).toLocaleString()} skipped: ${exact.skippedRevoked.toLocaleString()} revoked, ${exact.skippedNotEnrolled.toLocaleString()} never enrolled (no command can reach them).`}
              </>
            ) : shown ? (
              <span className="muted">The exact count could not be read; the batch reports it once sent.</span>
            ) : (
              <span className="muted">Counting the sensors…</span>
            )}
          </p>
          {sel.all && (
            <p className="muted small">
              Filter: {[tenantId && `tenant ${tenantId}`, state && `state ${state}`, q && `search "${q}"`, Object.keys(labels).length > 0 && `labels ${labelText}`].filter(Boolean).join(', ') || 'none (the whole fleet you can operate)'}. Sensors that match when the batch
              is created are included.
            </p>
          )}
        </ConfirmDialog>
      )}
    </section>
  );
}
