import { Link, useSearchParams } from 'react-router';
import { SENSOR_STATES } from '../api/types';
import { useSession } from '../auth/session';
import { ErrorBanner, Loading, StateBadge } from '../components/Status';
import { Time } from '../components/Time';
import { usePolling } from '../usePolling';

export const POLL_MS = 3000;

export function SensorsScreen() {
  const { api } = useSession();
  const [params, setParams] = useSearchParams();
  const tenantId = params.get('tenantId') ?? '';
  const state = params.get('state') ?? '';
  const tenants = usePolling((_s) => api.listTenants(), [api], null);
  const sensors = usePolling((signal) => api.listSensors({ tenantId, state }, signal), [api, tenantId, state], POLL_MS);

  function setFilter(key: string, value: string) {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    setParams(next, { replace: true });
  }

  return (
    <section>
      <div className="page-head">
        <h1>Sensors</h1>
        <span className="spacer" />
        <span className="muted small" aria-live="off">
          {sensors.updatedAt ? `Live · updated ${new Date(sensors.updatedAt).toLocaleTimeString()}` : ''}
        </span>
      </div>
      <div className="filters" role="group" aria-label="Filters">
        <div className="field">
          <label htmlFor="filter-tenant">Tenant</label>
          <select id="filter-tenant" value={tenantId} onChange={(e) => setFilter('tenantId', e.target.value)}>
            <option value="">All tenants</option>
            {tenants.data?.items.map((t) => (
              <option key={t.id} value={t.id}>
                {t.name} ({t.id})
              </option>
            ))}
            {tenantId && !tenants.data?.items.some((t) => t.id === tenantId) && <option value={tenantId}>{tenantId}</option>}
          </select>
        </div>
        <div className="field">
          <label htmlFor="filter-state">State</label>
          <select id="filter-state" value={state} onChange={(e) => setFilter('state', e.target.value)}>
            <option value="">All states</option>
            {SENSOR_STATES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
      </div>
      <ErrorBanner error={sensors.error} onRetry={sensors.reload} />
      {sensors.loading && !sensors.data ? (
        <Loading label="Loading sensors…" />
      ) : sensors.data && sensors.data.items.length === 0 ? (
        <p className="empty">
          No sensors{tenantId || state ? ' match these filters' : ' yet'}. Issue a claim code from a <Link to="/tenants">tenant</Link> and run the sensor agent with it.
        </p>
      ) : sensors.data ? (
        <div className="table-wrap">
          <table className="table">
            <caption className="sr-only">Sensors</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Tenant</th>
                <th scope="col">State</th>
                <th scope="col">Last seen</th>
                <th scope="col">Certificate expires</th>
              </tr>
            </thead>
            <tbody>
              {sensors.data.items.map((s) => (
                <tr key={s.id} data-sensor-id={s.id}>
                  <td>
                    <Link to={`/sensors/${encodeURIComponent(s.id)}`}>{s.name || s.id}</Link>
                    <div className="muted small mono">{s.id}</div>
                  </td>
                  <td>
                    <Link to={`/tenants/${encodeURIComponent(s.tenantId)}`}>{s.tenantId}</Link>
                  </td>
                  <td>
                    <StateBadge state={s.state} />
                  </td>
                  <td>
                    <Time value={s.lastSeenAt} />
                  </td>
                  <td>
                    <Time value={s.certificate?.notAfter} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}
