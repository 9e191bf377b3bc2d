import { useCallback, useEffect, useState } from 'react';
import type { FormEvent } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import type { Sensor } from '../api/types';
import { formatLabels, LabelChips, labelsPatch, parseLabels } from '../labels';
import { useAccess, useSession } from '../auth/session';
import { ConfirmDialog } from '../components/Dialog';
import { LoadMore } from '../components/LoadMore';
import { ErrorBanner, Loading, Notice, StateBadge } from '../components/Status';
import { Time } from '../components/Time';
import { useCursorList } from '../useCursorList';
import { usePolling } from '../usePolling';
import { POLL_MS } from './Sensors';

type Pending = 'start' | 'stop' | 'revoke' | 'decommission' | null;

export const HISTORY_PAGE = 20;

const COPY = {
  start: { title: 'Start sensor?', confirm: 'Start', text: 'The sensor will be told to start capturing.' },
  stop: { title: 'Stop sensor?', confirm: 'Stop', text: 'The sensor will stop capturing until it is started again.' },
  revoke: {
    title: 'Revoke sensor?',
    confirm: 'Revoke sensor',
    text: 'Its certificate and NATS credentials stop working at once and live connections are closed. This cannot be undone: the sensor must be enrolled again with a new claim code.',
  },
  decommission: {
    title: 'Decommission sensor?',
    confirm: 'Decommission sensor',
    text: 'It is revoked for good (certificate, sensor token, NATS user), its pending commands expire and it leaves the sensor list. Its history stays for the audit. Its ID can never be enrolled again.',
  },
};

export function SensorDetailScreen() {
  const { sensorId = '' } = useParams();
  const { api } = useSession();
  const sensor = usePolling((signal) => api.getSensor(sensorId, signal), [api, sensorId], POLL_MS);
  const [pending, setPending] = useState<Pending>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const s = sensor.data;
  const navigate = useNavigate();
  const [editing, setEditing] = useState(false);
  const decommissioned = !!s?.decommissionedAt;
  const revoked = s?.state === 'revoked';
  const { can } = useAccess();
  // Start, Stop and Revoke need the operator role on the sensor's tenant; they appear once it is known.
  const mayOperate = !!s && can('operate', s.tenantId);

  async function act(kind: Exclude<Pending, null>) {
    if (kind === 'decommission') {
      await api.decommissionSensor(sensorId);
      navigate('/sensors', { replace: true });
      return;
    }
    if (kind === 'revoke') {
      await api.revokeSensor(sensorId);
      setNotice('Sensor revoked. Its certificate and credentials no longer work.');
    } else {
      const { commandId } = await api.sendCommand(sensorId, kind);
      setNotice(`${kind === 'start' ? 'Start' : 'Stop'} command sent (command ${commandId}). The state changes when the sensor acknowledges it.`);
    }
    sensor.reload();
  }

  return (
    <section>
      <nav aria-label="Breadcrumb" className="crumbs">
        <Link to="/sensors">Sensors</Link> / <span aria-current="page">{s?.name || sensorId}</span>
      </nav>
      <div className="page-head">
        <h1>{s?.name || sensorId}</h1>
        {s && <StateBadge state={s.state} />}
        <span className="spacer" />
        {s && mayOperate && (
          <div className="actions" role="group" aria-label="Sensor actions">
            <button type="button" className="btn btn-primary" disabled={revoked || s.state === 'running'} onClick={() => setPending('start')}>
              Start
            </button>
            <button type="button" className="btn" disabled={revoked || s.state === 'stopped'} onClick={() => setPending('stop')}>
              Stop
            </button>
            <button type="button" className="btn btn-danger-outline" disabled={revoked} onClick={() => setPending('revoke')}>
              Revoke
            </button>
            <button type="button" className="btn" disabled={decommissioned} onClick={() => setEditing(true)}>
              Edit
            </button>
            <button type="button" className="btn btn-danger-outline" disabled={decommissioned} onClick={() => setPending('decommission')}>
              Decommission
            </button>
          </div>
        )}
      </div>
      {notice && <Notice>{notice}</Notice>}
      {decommissioned && (
        <Notice>
          Decommissioned <Time value={s?.decommissionedAt} />: revoked for good and left out of the sensor list.
        </Notice>
      )}
      {s && editing && (
        <EditSensor
          sensor={s}
          onClose={() => setEditing(false)}
          onSaved={() => {
            setEditing(false);
            setNotice('Name and labels saved.');
            sensor.reload();
          }}
        />
      )}
      <ErrorBanner error={sensor.error} onRetry={sensor.reload} />
      {sensor.loading && !s ? (
        <Loading label="Loading sensor…" />
      ) : s ? (
        <div className="grid">
          <div className="card">
            <h2>Sensor</h2>
            <dl className="props">
              <dt>ID</dt>
              <dd className="mono">{s.id}</dd>
              <dt>Tenant</dt>
              <dd>
                <Link to={`/tenants/${encodeURIComponent(s.tenantId)}`}>{s.tenantId}</Link>
              </dd>
              <dt>State</dt>
              <dd>
                <StateBadge state={s.state} />
              </dd>
              <dt>Last seen</dt>
              <dd>
                <Time value={s.lastSeenAt} />
              </dd>
              <dt>Hostname</dt>
              <dd className="break">{s.hostname || <span className="muted">not reported</span>}</dd>
              <dt>Agent version</dt>
              <dd className="mono">{s.agentVersion || <span className="muted">not reported</span>}</dd>
              <dt>Address</dt>
              <dd className="mono break">{s.address || <span className="muted">not known</span>}</dd>
              <dt>Labels</dt>
              <dd data-testid="labels">
                <LabelChips labels={s.labels} />
              </dd>
              <dt>Enrolled</dt>
              <dd>
                <Time value={s.createdAt} />
              </dd>
            </dl>
            <p className="card-foot">
              <Link to={`/analytics?tenantId=${encodeURIComponent(s.tenantId)}&sensorId=${encodeURIComponent(s.id)}`}>Events of this sensor</Link>
            </p>
          </div>
          <div className="card">
            <h2>Certificate</h2>
            <dl className="props">
              <dt>Serial</dt>
              <dd className="mono break">{s.certificate?.serial ?? <span className="muted">not enrolled</span>}</dd>
              <dt>Expires</dt>
              <dd>
                <Time value={s.certificate?.notAfter} />
              </dd>
            </dl>
          </div>
          <div className="card">
            <h2>Last command</h2>
            {s.lastCommand ? (
              <dl className="props">
                <dt>Action</dt>
                <dd>{s.lastCommand.action}</dd>
                <dt>Command ID</dt>
                <dd className="mono break">{s.lastCommand.commandId}</dd>
                <dt>Issued</dt>
                <dd>
                  <Time value={s.lastCommand.issuedAt} />
                </dd>
                <dt>Acknowledged</dt>
                <dd data-testid="ack">{s.lastCommand.acknowledgedAt ? <Time value={s.lastCommand.acknowledgedAt} /> : <span className="badge badge-warn">waiting for the sensor</span>}</dd>
              </dl>
            ) : (
              <p className="muted">No command sent yet.</p>
            )}
          </div>
        </div>
      ) : null}
      {s && <CommandHistory sensorId={s.id} lastChange={`${s.lastCommand?.commandId ?? ''} ${s.lastCommand?.acknowledgedAt ?? ''}`} />}
      {pending && (
        <ConfirmDialog title={COPY[pending].title} confirmLabel={COPY[pending].confirm} danger={pending !== 'start'} onClose={() => setPending(null)} onConfirm={() => act(pending)}>
          <p>
            <strong>{s?.name || sensorId}</strong>: {COPY[pending].text}
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

/** Renames a sensor and edits its labels as "key=value" text; checked here and by the API. */
function EditSensor({ sensor, onClose, onSaved }: { sensor: Sensor; onClose: () => void; onSaved: () => void }) {
  const { api } = useSession();
  const [name, setName] = useState(sensor.name);
  const [labels, setLabels] = useState(formatLabels(sensor.labels));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const parsed = parseLabels(labels);

  async function save(e: FormEvent) {
    e.preventDefault();
    if ('error' in parsed) return;
    setBusy(true);
    setError(null);
    try {
      const patch: { name?: string; labels?: Record<string, string | null> } = {};
      if (name.trim() !== sensor.name) patch.name = name.trim();
      const lp = labelsPatch(sensor.labels, parsed.labels);
      if (Object.keys(lp).length > 0) patch.labels = lp;
      await api.updateSensor(sensor.id, patch);
      onSaved();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form className="card form edit-sensor" onSubmit={save} aria-label="Edit sensor">
      <h2>Edit sensor</h2>
      <label htmlFor="sensor-name">Name</label>
      <input id="sensor-name" value={name} required maxLength={200} onChange={(e) => setName(e.target.value)} />
      <label htmlFor="sensor-labels">Labels</label>
      <input
        id="sensor-labels"
        className="mono"
        value={labels}
        placeholder="site=ams role=edge"
        aria-describedby="sensor-labels-help"
        aria-invalid={'error' in parsed}
        onChange={(e) => setLabels(e.target.value)}
      />
      <p id="sensor-labels-help" className={'error' in parsed ? 'small bad-text' : 'small muted'} role={'error' in parsed ? 'alert' : undefined}>
        {'error' in parsed ? parsed.error : 'key=value pairs separated by spaces; at most 16. Remove a pair to remove the label.'}
      </p>
      <ErrorBanner error={error} />
      <div className="actions">
        <button type="submit" className="btn btn-primary" disabled={busy || 'error' in parsed || !name.trim()}>
          Save
        </button>
        <button type="button" className="btn" onClick={onClose}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** The sensor's commands, newest first, reloaded when its last command changes (sent or answered). */
function CommandHistory({ sensorId, lastChange }: { sensorId: string; lastChange: string }) {
  const { api } = useSession();
  const load = useCallback((cursor: string, signal: AbortSignal) => api.sensorCommands(sensorId, { limit: HISTORY_PAGE, cursor: cursor || undefined }, signal), [api, sensorId]);
  const history = useCursorList(load);
  const { reload } = history;
  const [seen, setSeen] = useState(lastChange);
  useEffect(() => {
    if (lastChange !== seen) {
      setSeen(lastChange);
      reload();
    }
  }, [lastChange, seen, reload]);

  return (
    <>
      <h2 id="history-title">Command history</h2>
      <ErrorBanner error={history.error} onRetry={history.retry} />
      {history.loading && history.items.length === 0 ? (
        <Loading label="Loading the command history…" />
      ) : history.items.length === 0 && !history.error ? (
        <p className="empty">No command sent yet.</p>
      ) : history.items.length > 0 ? (
        <>
          <div className="table-wrap">
            <table className="table" aria-labelledby="history-title">
              <thead>
                <tr>
                  <th scope="col">Issued</th>
                  <th scope="col">Action</th>
                  <th scope="col">Status</th>
                  <th scope="col">Answered</th>
                  <th scope="col">By</th>
                  <th scope="col">Command ID</th>
                </tr>
              </thead>
              <tbody>
                {history.items.map((c) => (
                  <tr key={c.commandId}>
                    <td>
                      <Time value={c.issuedAt} />
                    </td>
                    <td>{c.action}</td>
                    <td>
                      <StateBadge state={c.status} />
                      {c.outcome === 'refused' && (
                        <div className="small bad-text">
                          refused by the sensor{c.outcomeReason ? `: ${c.outcomeReason}` : ''}
                          {c.outcomeDetail ? ` (${c.outcomeDetail})` : ''}
                        </div>
                      )}
                    </td>
                    <td>
                      <Time value={c.acknowledgedAt ?? c.failedAt} />
                    </td>
                    <td className="break">{c.issuedBy || <span className="muted">—</span>}</td>
                    <td className="mono break">{c.commandId}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <LoadMore list={history} noun={['command', 'commands']} />
        </>
      ) : null}
    </>
  );
}
