// Analytics: one tenant's events over a time range — totals, events and alerts over time, and
// the top sources, destinations, signatures and CVEs. What is shown is also what the chat gets
// as context (see analytics/snapshot.tsx).

import { useEffect, useLayoutEffect, useRef, useState } from 'react';
import type { RefObject } from 'react';
import type { AddressCount, Overview } from '../api/types';
import { snapshotOf, usePublishView } from '../analytics/snapshot';
import { useSession } from '../auth/session';
import { LineChart } from '../components/LineChart';
import { ErrorBanner, Loading } from '../components/Status';
import { SelectField } from '../components/SelectField';
import { TenantSelect } from '../components/TenantSelect';
import { Time } from '../components/Time';
import { usePolling } from '../usePolling';
import { useFilters } from '../useFilters';

export const RANGES = [
  { id: '1h', label: 'Last hour', ms: 3600_000 },
  { id: '6h', label: 'Last 6 hours', ms: 6 * 3600_000 },
  { id: '24h', label: 'Last 24 hours', ms: 24 * 3600_000 },
  { id: '7d', label: 'Last 7 days', ms: 7 * 24 * 3600_000 },
  { id: '30d', label: 'Last 30 days', ms: 30 * 24 * 3600_000 },
] as const;
const DEFAULT_RANGE = '24h';
/** The sensor picker offers the first this many of the tenant's sensors; a linked one outside them stays choosable. */
const SENSOR_CHOICES = 500;
export const REFRESH_MS = 60_000;

/** The range ending now, to the minute, so repeated loads ask for the same buckets. */
export function rangeFor(id: string, now = Date.now()): { from: string; to: string } {
  const r = RANGES.find((x) => x.id === id) ?? RANGES.find((x) => x.id === DEFAULT_RANGE)!;
  const to = Math.ceil(now / 60_000) * 60_000;
  return { from: new Date(to - r.ms).toISOString().replace('.000Z', 'Z'), to: new Date(to).toISOString().replace('.000Z', 'Z') };
}

export function AnalyticsScreen() {
  const { api } = useSession();
  const filters = useFilters();
  const tenants = usePolling((_s) => api.listTenants(), [api], null);
  const tenantId = filters.get('tenantId');
  const range = filters.get('range') || DEFAULT_RANGE;
  const sensorId = filters.get('sensorId');
  const sensors = usePolling((signal) => (tenantId ? api.listSensors({ tenantId, limit: SENSOR_CHOICES }, signal) : Promise.resolve({ items: [] })), [api, tenantId], null);
  const overview = usePolling(
    (signal) => (tenantId ? api.analyticsOverview({ tenantId, ...rangeFor(range), sensorId: sensorId || undefined, limit: 10 }, signal) : Promise.resolve(null)),
    [api, tenantId, range, sensorId],
    REFRESH_MS,
  );

  function setParam(key: string, value: string) {
    // Another tenant's sensor would not be in the new tenant's list.
    filters.set(key === 'tenantId' ? { tenantId: value, sensorId: '' } : { [key]: value });
  }

  // Without a tenant in the URL, show the first one.
  const firstTenant = tenants.data?.items[0]?.id;
  useEffect(() => {
    if (!tenantId && firstTenant) setParam('tenantId', firstTenant);
    // setParam changes on every render; the tenant list is what matters.
  }, [tenantId, firstTenant]);

  const ov = overview.data;
  usePublishView(ov && ov.tenantId === tenantId ? { tenantId, snapshot: snapshotOf(ov, sensorId) } : null);

  return (
    <section>
      <div className="page-head">
        <h1>Analytics</h1>
        <span className="spacer" />
        <span className="muted small" aria-live="off">
          {overview.updatedAt ? `Updated ${new Date(overview.updatedAt).toLocaleTimeString()}` : ''}
        </span>
      </div>
      <div className="filters" role="group" aria-label="Analytics filters">
        <TenantSelect id="analytics-tenant" value={tenantId} tenants={tenants.data?.items} disabled={!tenants.data} onChange={(v) => setParam('tenantId', v)} />
        <SelectField id="analytics-range" label="Time range" value={range} choices={RANGES.map((r) => ({ value: r.id, label: r.label }))} onChange={(v) => setParam('range', v)} />
        <div className="field">
          <label htmlFor="analytics-sensor">Sensor</label>
          <select id="analytics-sensor" value={sensorId} onChange={(e) => setParam('sensorId', e.target.value)} disabled={!tenantId}>
            <option value="">All sensors</option>
            {sensors.data?.items.map((s) => (
              <option key={s.id} value={s.id}>
                {s.name || s.id}
              </option>
            ))}
            {sensorId && !sensors.data?.items.some((s) => s.id === sensorId) && <option value={sensorId}>{sensorId}</option>}
          </select>
        </div>
      </div>
      <ErrorBanner error={tenants.error} onRetry={tenants.reload} />
      {tenants.data?.items.length === 0 ? (
        <p className="empty">No tenants yet. Create a tenant and enrol sensors to see their events here.</p>
      ) : (
        <>
          <ErrorBanner error={overview.error} onRetry={overview.reload} />
          {!tenantId || (overview.loading && !ov) ? (
            !overview.error && <Loading label="Loading analytics…" />
          ) : ov && ov.totals.events === 0 ? (
            <p className="empty">No events for this tenant{sensorId ? ' and sensor' : ''} in this time range.</p>
          ) : ov ? (
            <OverviewView ov={ov} />
          ) : null}
        </>
      )}
    </section>
  );
}

function OverviewView({ ov }: { ov: Overview }) {
  return (
    <>
      <dl className="stats" aria-label="Totals">
        <div>
          <dt>Events</dt>
          <dd>{ov.totals.events.toLocaleString()}</dd>
        </div>
        <div>
          <dt>Alerts</dt>
          <dd>{ov.totals.alerts.toLocaleString()}</dd>
        </div>
        <div>
          <dt>Sensors</dt>
          <dd>{ov.totals.sensors.toLocaleString()}</dd>
        </div>
      </dl>
      <SeriesChart ov={ov} />
      <div className="grid-2">
        <AddressTable caption="Top sources" rows={ov.topSources} />
        <AddressTable caption="Top destinations" rows={ov.topDestinations} />
      </div>
      <div className="table-scroll">
        <table className="table">
          <caption>Top signatures</caption>
          <thead>
            <tr>
              <th scope="col">Signature</th>
              <th scope="col">Category</th>
              <th scope="col">Severity</th>
              <th scope="col" className="num">Alerts</th>
            </tr>
          </thead>
          <tbody>
            {ov.topSignatures.length === 0 && (
              <tr>
                <td colSpan={4} className="muted">
                  No alerts.
                </td>
              </tr>
            )}
            {ov.topSignatures.map((s) => (
              <tr key={`${s.signatureId}-${s.signature}`}>
                <td>
                  {s.signature || '(no name)'}
                  {s.signatureId > 0 && <div className="muted small mono">sid {s.signatureId}</div>}
                </td>
                <td>{s.category}</td>
                <td>{s.severity || ''}</td>
                <td className="num">{s.count.toLocaleString()}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div className="table-scroll">
        <table className="table">
          <caption>CVEs</caption>
          <thead>
            <tr>
              <th scope="col">CVE</th>
              <th scope="col" className="num">Events</th>
              <th scope="col">Last seen</th>
            </tr>
          </thead>
          <tbody>
            {ov.cves.length === 0 && (
              <tr>
                <td colSpan={3} className="muted">
                  No CVEs named.
                </td>
              </tr>
            )}
            {ov.cves.map((c) => (
              <tr key={c.id}>
                <td className="mono">{c.id}</td>
                <td className="num">{c.count.toLocaleString()}</td>
                <td>
                  <Time value={c.lastSeen} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

function AddressTable({ caption, rows }: { caption: string; rows: AddressCount[] }) {
  return (
    <table className="table">
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Address</th>
          <th scope="col" className="num">Events</th>
        </tr>
      </thead>
      <tbody>
        {rows.length === 0 && (
          <tr>
            <td colSpan={2} className="muted">
              None.
            </td>
          </tr>
        )}
        {rows.map((r) => (
          <tr key={r.ip}>
            <td className="mono">{r.ip}</td>
            <td className="num">{r.count.toLocaleString()}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Labels a bucket: times for buckets under a day, dates for daily ones. */
export function bucketLabel(iso: string, bucketSeconds: number): string {
  const d = new Date(iso);
  if (bucketSeconds >= 86400) return d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
  if (bucketSeconds >= 3600) return d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
  return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
}

function SeriesChart({ ov }: { ov: Overview }) {
  const ref = useRef<HTMLDivElement>(null);
  const width = useWidth(ref);
  const rows = ov.series.map((p) => ({ label: bucketLabel(p.t, ov.bucketSeconds), values: { events: p.events, alerts: p.alerts } }));
  return (
    <figure className="chart" aria-label="Events and alerts over time">
      <figcaption>Events and alerts over time</figcaption>
      <div ref={ref} className="chart-area">
        <LineChart
          width={width}
          height={260}
          rows={rows}
          series={[
            { key: 'events', name: 'Events', className: 'chart-events' },
            { key: 'alerts', name: 'Alerts', className: 'chart-alerts' },
          ]}
        />
      </div>
    </figure>
  );
}

/** The element's content width, following resizes where the browser reports them. */
function useWidth(ref: RefObject<HTMLElement | null>, fallback = 800): number {
  const [width, setWidth] = useState(fallback);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    const measure = () => el.clientWidth > 0 && setWidth(el.clientWidth);
    measure();
    if (typeof ResizeObserver === 'undefined') return;
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, [ref]);
  return width;
}
